"""profilectl's own files: one safe way to write a file into a folder (its own or someone else's),
and JSON read back into typed stages.

Every file profilectl writes (env.json, manifest.json, summary.json, tables, exports, merged traces,
cache entries, partials) goes through `write_into`: the destination folder is opened once
(O_DIRECTORY|O_NOFOLLOW: a symbolic link there is followed only when the running user or root owns
it), the temporary file is created relative to that descriptor with O_CREAT|O_EXCL|O_NOFOLLOW under
an unpredictable name, written, fsynced and renamed within the same folder descriptor. A link someone
planted at any name profilectl uses is never followed, a reader never sees half a file, and on any
failure (a full disk, an exception, Ctrl-C) the temporary is removed: nothing is left behind. Files
that a library writes (Parquet, SQLite) are written through the same file object. Every file it
reads back goes through `load_typed`, so a file that does not fit its type is one line naming it.
"""

from __future__ import annotations

import errno
import io
import json
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

from profilectl.errors import FormatError

T = TypeVar("T")

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
LINK_HOPS = 40  # as the kernel's own limit on links in one path


def _file_mode() -> int:
    """0666 minus the process umask: what open() would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class UntrustedLink(OSError):
    """The folder to write into is a symbolic link that neither the running user nor root owns."""


def open_folder(path: Path | str) -> int:
    """A descriptor of the folder `path`, opened once, its last component never followed through a
    link that someone else planted: a link there is followed only when the running user or root owns
    it (the link's owner and its text read from one descriptor of the link, so it cannot be swapped
    in between). UntrustedLink otherwise; other OSErrors as open() raises them."""
    where = os.fspath(path) or "."
    for _ in range(LINK_HOPS):
        try:
            return os.open(where, FOLDER_FLAGS)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            error = exc
        try:
            link = os.open(where, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            raise error from None
        try:
            st = os.fstat(link)
            if not stat.S_ISLNK(st.st_mode):
                raise error
            if st.st_uid not in (os.geteuid(), 0):
                raise UntrustedLink(errno.ELOOP, f"{where} is a symbolic link owned by uid {st.st_uid}, not by "
                                                 f"this user (uid {os.geteuid()}): not followed")
            text = os.readlink("", dir_fd=link)
        finally:
            os.close(link)
        where = os.path.join(os.path.dirname(where), text)
    raise OSError(errno.ELOOP, f"{path}: too many levels of symbolic links")


def temporary_name(name: str) -> str:
    """A hidden name beside `name` that nobody can predict (no PID, no fixed suffix)."""
    return f".{name[:120]}.{secrets.token_hex(8)}.tmp"


def standing_in(folder: int, name: str) -> str | None:
    """not_a_regular_file for `name` inside the opened `folder`."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return _kind_if_not_regular(mode)


def _kind_if_not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe (fifo)"), (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


class NotARegularFile(FileExistsError):
    """A write with replace=True found something that is not a regular file at the path."""


def write_in(folder: int, name: str, write: Callable[[IO[bytes]], object], replace: bool = True,
             mode: int | None = None, label: str | None = None) -> None:
    """`write(fh)` as the complete file `name` in the opened `folder` (see the module's docstring).

    replace=True: whatever regular file or link stands at `name` is replaced (the link itself, never
    its target); replace=False: FileExistsError when `name` is taken (by anything, also a link).
    Never replaces what is not a regular file or a link (NotARegularFile: a device node, a fifo, a
    folder). `mode`: the new file's permissions (default: 0666 less the umask)."""
    shown = label or name
    tmp = temporary_name(name)
    fd = os.open(tmp, NEW_FILE_FLAGS, 0o600, dir_fd=folder)
    try:
        with os.fdopen(fd, "w+b") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), _file_mode() if mode is None else mode)
            os.fsync(fh.fileno())
        if replace:
            standing = standing_in(folder, name)  # just before: it may have appeared meanwhile
            if standing:
                raise NotARegularFile(f"{shown} is {standing}")
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            return
        try:  # atomic and never overwrites: fails on any existing name, also a dangling link
            os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            raise FileExistsError(f"{shown} exists") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            # a file system without hard links: claim the name exclusively, then fill it
            os.close(os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=folder))
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            return
        os.unlink(tmp, dir_fd=folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except OSError:
            pass
        raise


def write_into(path: Path, write: Callable[[IO[bytes]], object], replace: bool = True, mode: int | None = None) -> None:
    """`write(fh)` as the complete file at `path`: its folder opened once, then write_in."""
    folder = open_folder(path.parent)
    try:
        write_in(folder, path.name, write, replace, mode, label=str(path))
    finally:
        os.close(folder)


def write_atomic(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write through `write(fh)` (a text file unless `binary`) as the complete file at `path`."""
    if binary:
        write_into(path, write)
        return

    def as_text(fh: IO[bytes]) -> None:
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
        try:
            write(text)
            text.flush()
        finally:
            text.detach()  # the binary file stays open: write_in closes it
    write_into(path, as_text)


def write_text_atomic(path: Path, text: str) -> None:
    data = text.encode("utf-8")
    write_into(path, lambda fh: fh.write(data))


def not_a_regular_file(path: Path) -> str | None:
    """What stands at `path` when it is neither absent, a regular file nor a symbolic link (which is
    replaced itself): 'a character device', 'a folder' ... Such a thing is never replaced."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return _kind_if_not_regular(mode)


def write_text_new(path: Path, text: str, replace: bool = False) -> None:
    """`text` as a complete file at `path`, which must not exist (not even as a symbolic link)
    unless `replace`; a link there is replaced itself, never followed. FileExistsError when taken.
    Never replaces anything but a regular file or a link (NotARegularFile): not a device node such as
    /dev/null, a fifo, a socket or a folder, with or without `replace`."""
    standing = not_a_regular_file(path)
    if standing:
        raise NotARegularFile(f"{path} is {standing}")
    data = text.encode("utf-8")
    write_into(path, lambda fh: fh.write(data), replace=replace)


def write_json_atomic(path: Path, payload: Any, indent: int | None = 2) -> None:
    """JSON, atomically. json.dumps (not json.dump) so indent=None uses the C encoder: several times
    faster for large summaries."""
    text = json.dumps(payload, indent=indent, default=str, ensure_ascii=False) + "\n"
    write_text_atomic(path, text)


def read_json(path: Path) -> Any:
    """A JSON file, or a one-line FormatError naming the file (and the line where it breaks)."""
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}:{exc.lineno}: not valid JSON (truncated?): {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{path}: not valid JSON (nested too deeply)") from None


def env_limit(name: str, default: int) -> int:
    """A bound on hostile or broken input from $PROFILECTL_<name> (a whole number; 0 lifts it), else
    `default`; a SettingError (UsageError) naming the variable when it is not a whole number."""
    from profilectl import settings
    variable = f"PROFILECTL_{name}"
    return default if settings.raw(variable) is None else settings.get_limit(variable)


def read_regular(path: Path, limit: int, limit_name: str | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them: never through a symbolic link
    and never a device (/dev/zero), fifo or socket, so nothing can make the read endless or endlessly
    large. FormatError (one line naming the file) otherwise; FileNotFoundError when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FormatError(f"{path}: a symbolic link, not a file: not followed") from None
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        kind = _kind_if_not_regular(st.st_mode)
        if kind is not None or stat.S_ISLNK(st.st_mode):
            raise FormatError(f"{path}: {kind or 'a symbolic link'}, not a regular file: not read")
        setting = f" (PROFILECTL_{limit_name})" if limit_name else ""
        if st.st_size > limit:
            raise FormatError(f"{path}: {st.st_size} bytes, more than the {limit} read{setting}")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 22):
            size += len(chunk)
            if size > limit:
                raise FormatError(f"{path}: grew past {limit} bytes while read{setting}")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except MemoryError:
        raise FormatError(f"{path}: too large to read into memory here") from None
    finally:
        os.close(fd)


def load_typed(cls: type[T], data: Any, source: str | Path, what: str | None = None) -> T:
    """`data` (parsed JSON) as an instance of the frozen dataclass `cls`: every field's type is
    checked, lists become tuples, unknown keys are ignored (newer writers may add keys).
    A mismatch is one FormatError line: '<source>: not a valid <what>: wrong value type for field ...'."""
    import dacite  # imported here: only commands that read files back need it

    label = what or cls.__name__
    if not isinstance(data, dict):
        raise FormatError(f"{source}: not a valid {label}: expected a JSON object, found {type(data).__name__}")
    try:
        return dacite.from_dict(cls, data, config=dacite.Config(cast=[tuple], strict=False))
    except dacite.DaciteError as exc:
        raise FormatError(f"{source}: not a valid {label}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{source}: not a valid {label}: {exc}") from None


def read_typed(cls: type[T], path: Path, what: str | None = None) -> T:
    return load_typed(cls, read_json(path), path, what)
