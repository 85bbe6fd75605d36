"""Where profilectl keeps answers it can compute again (probe answers, counter listings, assessments,
summaries, printed reports, partials), and how an entry is read and written.

The folder: $PROFILECTL_CACHE_DIR, else $XDG_CACHE_HOME/profilectl, else <home>/.cache/profilectl,
where <home> is the running user's home from the password database (the effective uid's), never
$HOME: root run with a user's environment (sudo -E, runuser without -l) keeps its cache in its own
home and never writes into the user's. The cache is the running user's alone:
- a folder of it, or an entry, that another user owns is never read (another user could have put a
  report there at a key anyone can compute); a $XDG_CACHE_HOME of another user is passed over, a
  $PROFILECTL_CACHE_DIR of another user turns the cache off (said once, on stderr);
- no folder is created inside a folder of another user (root's own folders are fine: /tmp);
- entries are written by files.write_in (a temporary with an unpredictable name, renamed: a reader
  never sees half of one, a planted link is never followed) and read through O_NOFOLLOW.
It is bounded: $PROFILECTL_CACHE_MAX_MB (default 512; 0 turns the cache off) for all its entries
together; after a write that takes it past the bound, the entries used longest ago (an entry read
is marked used) are removed until it is back under 90 % of it. A cache that cannot be read or
written is skipped: it only saves time. Imports nothing heavy: the probe and `report` look here
before anything else.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from profilectl import settings

CACHE_ENV = "PROFILECTL_CACHE_DIR"
MAX_ENV = "PROFILECTL_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512.0
EVICT_TO = 0.9  # an eviction brings the cache down to this share of its bound (not one entry per write)
STALE_TMP_S = 3600  # a temporary this old was left by a writer that died: removed by the next eviction
_ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_said: set[str] = set()


def _note_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        sys.stderr.write(f"profilectl: note: {text}\n")


def _home() -> Path | None:
    """The running user's home as the password database has it (the effective uid's), not $HOME."""
    import pwd
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:  # a uid without an entry (a container run with --user N): no home of its own
        return None
    return Path(home) if home and os.path.isabs(home) else None


def _owner_of_nearest(path: Path) -> int | None:
    """The owner of `path`, or of its nearest existing ancestor (where it would be created)."""
    for place in (path, *path.parents):
        try:
            return os.lstat(place).st_uid
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return None


def cache_dir() -> Path | None:
    """The cache folder of the running user, or None when there is none (see the module's docstring)."""
    explicit = settings.get_path(CACHE_ENV)
    if explicit is not None:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg) and _owner_of_nearest(Path(xdg)) == os.geteuid():
        return Path(xdg) / "profilectl"
    home = _home()
    return home / ".cache" / "profilectl" if home is not None else None


def max_bytes() -> int:
    """The bound on the cache's entries together ($PROFILECTL_CACHE_MAX_MB; 0: no cache)."""
    value = settings.get_float(MAX_ENV)  # a number, 0 or more (else one line naming it)
    return int((DEFAULT_MAX_MB if value is None else value) * 1e6)


def _trusted(fd: int, where: Path) -> bool:
    """The folder `fd` is the running user's: True; else False (said once for the top folder)."""
    owner = os.fstat(fd).st_uid
    if owner == os.geteuid():
        return True
    if settings.raw(CACHE_ENV) is not None:
        _note_once(f"the cache folder {where} belongs to uid {owner}, not to this user (uid {os.geteuid()}): "
                   f"no cache is used (set {CACHE_ENV} to a folder of your own)")
    return False


def _open(kind: str, create: bool) -> int | None:
    """A descriptor of the cache's `kind` folder, the running user's, or None."""
    from profilectl.files import open_folder
    root = cache_dir()
    if root is None or max_bytes() == 0:
        return None
    try:
        if create and not root.is_dir():
            if _owner_of_nearest(root) not in (os.geteuid(), 0):
                return None  # never a folder of ours inside another user's
            os.makedirs(root, mode=0o700, exist_ok=True)
        top = open_folder(root)
    except OSError:
        return None
    try:
        if not _trusted(top, root):
            return None
        if create:
            try:
                os.mkdir(kind, 0o700, dir_fd=top)
            except FileExistsError:
                pass
        sub = os.open(kind, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
    except OSError:
        return None
    finally:
        os.close(top)
    if os.fstat(sub).st_uid != os.geteuid():
        os.close(sub)
        return None
    return sub


def read(kind: str, name: str) -> bytes | None:
    """The entry's bytes, or None: none there, or not a regular file of the running user's, or
    larger than the cache's bound (a planted /dev/zero or fifo is never read)."""
    folder = _open(kind, create=False)
    if folder is None:
        return None
    try:
        fd = os.open(name, _ENTRY_FLAGS, dir_fd=folder)
    except OSError:
        os.close(folder)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > max_bytes():
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > st.st_size:  # grew while read: not a settled entry
                return None
            chunks.append(chunk)
        try:
            os.utime(name, dir_fd=folder, follow_symlinks=False)  # used now: evicted last
        except OSError:
            pass
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
        os.close(folder)


def read_text(kind: str, name: str) -> str | None:
    data = read(kind, name)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def keep(kind: str, name: str, data: bytes | str) -> None:
    """Write an entry whole (files.write_in), or not at all; then keep the cache within its bound."""
    from profilectl.files import write_in
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        bound = max_bytes()
    except Exception:  # noqa: BLE001  (a bad bound is said by the next read of it, where it can be)
        return
    if len(payload) > bound:
        return
    folder = _open(kind, create=True)
    if folder is None:
        return
    try:
        write_in(folder, name, lambda fh: fh.write(payload), mode=0o600)
    except OSError:
        return
    finally:
        os.close(folder)
    evict(bound)


def evict(bound: int) -> None:
    """Remove the entries used longest ago until the cache is under EVICT_TO of `bound` (only when it
    is over the bound); temporaries of writers that died are removed too."""
    import time
    root = cache_dir()
    if root is None:
        return
    from profilectl.files import open_folder
    try:
        top = open_folder(root)
    except OSError:
        return
    entries: list[tuple[int, int, int, str]] = []  # (last used, size, folder fd, name)
    folders: list[int] = []
    total = 0
    now = time.time()
    try:
        if os.fstat(top).st_uid != os.geteuid():
            return
        for kind in os.listdir(top):
            try:
                sub = os.open(kind, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
            except OSError:
                continue
            folders.append(sub)
            if os.fstat(sub).st_uid != os.geteuid():
                continue
            for entry in os.scandir(sub):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    if now - st.st_mtime > STALE_TMP_S:
                        _unlink(sub, entry.name)
                    continue
                total += st.st_size
                entries.append((st.st_mtime_ns, st.st_size, sub, entry.name))
        if total <= bound:
            return
        entries.sort()
        for _, size, sub, name in entries:
            if total <= bound * EVICT_TO:
                break
            if _unlink(sub, name):
                total -= size
    except OSError:
        return
    finally:
        for fd in folders:
            os.close(fd)
        os.close(top)


def _unlink(folder: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=folder)
        return True
    except OSError as exc:
        return exc.errno == errno.ENOENT
