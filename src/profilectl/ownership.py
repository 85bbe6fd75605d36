"""Files that belong to the user a run is for, without ever giving that user anything else.

When profilectl runs as root for another user (a traces folder that user owns, or
$PROFILECTL_HOST_UID/GID: the container services), two things keep ownership right:

1. `become(owner, keep)`: before the run directory exists, profilectl itself becomes that user
   (setgroups/setresgid/setresuid), keeping only the capabilities the plan decided the profiler
   needs (privilege.py: usually none) as *ambient* capabilities, so the processes it starts hold
   them although they are not root; where any is kept, core dumps are off. Every file of the run
   (profilectl's, the profiler's, the workload's) is then made by that user, with that owner, from
   the start: nothing to hand back, nothing root-owned after a `docker kill`, an OOM kill or a
   SIGKILL, and a symbolic link the user plants anywhere leads only where the user could write.
2. `hand_back(dir_fd, owner)`: where root did write (a kernel without ambient capabilities, the
   container entrypoint's files from before), ownership is handed back by a walk that trusts no
   path twice: every directory is opened once, relative to its parent's descriptor, with
   O_NOFOLLOW|O_DIRECTORY and checked (same inode as listed, same file system); every file is
   opened relative to that descriptor with O_NOFOLLOW|O_NONBLOCK, checked (a regular file, one link,
   the inode listed) and changed with fchown on that descriptor. Symbolic links, devices, fifos,
   sockets, files with other links and files owned by anyone but root (or the owner already) are
   refused, never followed. A sub-folder swapped for a symbolic link between the listing and the
   change is therefore never entered: nothing outside the run is ever changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import pwd
import resource
import stat
from dataclasses import dataclass, field

CAP_SYS_PTRACE = 19
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_NAMES = {CAP_SYS_PTRACE: "SYS_PTRACE", CAP_SYS_ADMIN: "SYS_ADMIN", CAP_PERFMON: "PERFMON"}
CAP_NUMBERS = {name: number for number, name in CAP_NAMES.items()}  # the only ones a plan may keep
PR_SET_DUMPABLE = 4
PR_SET_KEEPCAPS = 8
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_DEPTH = 512  # directory levels handed back; deeper ones are refused (each level holds one descriptor)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


# ------------------------------------------------------------------ becoming the user
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _capget() -> tuple[int, int, int]:
    """This thread's (effective, permitted, inheritable) capability masks."""
    libc = _libc()
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    masks = [data[0].effective | data[1].effective << 32, data[0].permitted | data[1].permitted << 32,
             data[0].inheritable | data[1].inheritable << 32]
    return masks[0], masks[1], masks[2]


def _capset(effective: int, permitted: int, inheritable: int) -> None:
    libc = _libc()
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    for index in (0, 1):
        shift = 32 * index
        data[index].effective = (effective >> shift) & 0xFFFFFFFF
        data[index].permitted = (permitted >> shift) & 0xFFFFFFFF
        data[index].inheritable = (inheritable >> shift) & 0xFFFFFFFF
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset failed: {os.strerror(code)}")


def effective_caps() -> set[int]:
    try:
        effective, _, _ = _capget()
    except (OSError, AttributeError):
        return set()
    return {cap for cap in range(64) if effective >> cap & 1}


@dataclass(frozen=True)
class Became:
    """The user profilectl became for a run (become): its uid and gid, and the capabilities it kept for the profiler."""
    uid: int
    gid: int
    caps: tuple[str, ...]  # the capabilities kept (ambient), by name

    def note(self) -> str:
        kept = f", keeping only {', '.join('CAP_' + c for c in self.caps)} for the profiler (core dumps off)" \
            if self.caps else " with no capabilities"
        return f"profilectl ran as uid {self.uid} gid {self.gid} (the user the run is for){kept}: every file " \
               f"of the run was made with that owner"


def user_groups(uid: int, gid: int) -> list[int]:
    """The user's own groups (from the account database), else just `gid`: never root's groups."""
    try:
        name = pwd.getpwuid(uid).pw_name
        groups = os.getgrouplist(name, gid)
    except (KeyError, OSError):
        groups = [gid]
    return sorted({g for g in groups if g != 0} | ({gid} if gid != 0 else set())) or [gid]


def device_groups() -> tuple[int, ...]:
    """The groups that own the GPU device nodes and that this process is in (compose's group_add):
    the only groups besides the user's own that a dropped process keeps (to open the GPU)."""
    import glob
    gids = set()
    for node in ["/dev/kfd", *glob.glob("/dev/dri/*"), *glob.glob("/dev/nvidia*")]:
        try:
            gids.add(os.stat(node).st_gid)
        except OSError:
            pass
    return tuple(sorted(gid for gid in gids & set(os.getgroups()) if gid != 0))


def ambient_supported() -> bool:
    try:
        return _libc().prctl(PR_CAP_AMBIENT, 1, CAP_SYS_ADMIN, 0, 0) >= 0  # PR_CAP_AMBIENT_IS_SET
    except (OSError, AttributeError):
        return False


def can_run_as(owner: tuple[int, int], folders: tuple[str, ...], entered: tuple[str, ...] = ()) -> bool:
    """Whether profilectl can go on as `owner`: write in (and pass through to) each of `folders`,
    enter each of `entered` (the working folder: the workload's own business what it writes there),
    run this Python (the step supervisor is started with it) and read its standard library and
    profilectl itself (imported later). Asked by a forked child that becomes the user, so the kernel
    answers."""
    import sys
    needed = [(f, os.W_OK | os.X_OK) for f in folders] + [(f, os.X_OK) for f in entered] + \
        [(sys.executable, os.X_OK)] + \
        [(os.path.dirname(m.__file__ or "."), os.R_OK | os.X_OK) for m in (os, sys.modules["profilectl"])]
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 1
        try:
            os.setgroups(user_groups(*owner))
            os.setresgid(owner[1], owner[1], owner[1])
            os.setresuid(owner[0], owner[0], owner[0])
            code = 0 if all(os.access(path, mode) for path, mode in needed) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def become(owner: tuple[int, int], keep: tuple[int, ...] = (), extra_groups: tuple[int, ...] = ()) -> Became:
    """Turn this process (main thread, before any thread or child exists) into `owner` for good,
    keeping the capabilities in `keep` that it holds now as ambient ones, so that the processes it
    starts have them too. OSError when the kernel refuses (then nothing was changed, or the process is
    already the user with no capabilities: both safe)."""
    uid, gid = owner
    held = effective_caps()
    kept = tuple(cap for cap in keep if cap in held)
    if kept and not ambient_supported():  # before anything changes: the caller stays root, hands back
        raise OSError(errno.ENOSYS, "this kernel has no ambient capabilities (Linux 4.3+)")
    libc = _libc()
    if kept and libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS) failed")
    os.setgroups(sorted(set(user_groups(uid, gid)) | set(extra_groups)))
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # from here the process can never be root again
    if kept:
        mask = sum(1 << cap for cap in kept)
        _capset(0, mask, mask)  # permitted and inheritable: what ambient needs; nothing effective here
        for cap in kept:
            if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"cannot keep CAP_{CAP_NAMES.get(cap, cap)} across exec")
        libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
        # No core file of a process holding a capability (the limit is inherited across exec), and
        # this process itself not dumpable: /proc/<pid>/mem and ptrace stay root's
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    home = _home_of(uid)
    if home:
        os.environ["HOME"] = home  # the user's caches (torch, triton), not root's unreadable /root
    os.environ.pop("XDG_RUNTIME_DIR", None)
    return Became(uid, gid, tuple(CAP_NAMES.get(cap, str(cap)) for cap in kept))


def _home_of(uid: int) -> str | None:
    try:
        home = pwd.getpwuid(uid).pw_dir
    except KeyError:
        home = ""
    if home and os.access(home, os.W_OK | os.X_OK):
        return home
    fallback = f"/tmp/profilectl-home-{uid}"
    try:
        os.makedirs(fallback, mode=0o700, exist_ok=True)
        st = os.lstat(fallback)
        if st.st_uid == uid and stat.S_ISDIR(st.st_mode):
            return fallback
    except OSError:
        pass
    return None


# ------------------------------------------------------------------ handing back
@dataclass
class HandBack:
    """What hand_back did: how many files and folders it gave to the owner, and those it refused, with why."""
    changed: int = 0
    refused: list[str] = field(default_factory=list)  # 'path: why', for the log


def open_dir(path: str | os.PathLike[str], dir_fd: int | None = None) -> int:
    """A directory descriptor, never through a symbolic link in the last component."""
    return os.open(path, DIR_FLAGS, dir_fd=dir_fd)


def hand_back(dir_fd: int, owner: tuple[int, int], since: float | None = None, label: str = ".") -> HandBack:
    """Give the tree under `dir_fd` (a directory opened once, e.g. at its creation) to `owner`: every
    directory and regular file in it owned by root or by this process (changed at or after `since`,
    when given), walked by descriptors only (see the module)."""
    result = HandBack()
    ours = {0, os.geteuid()}
    top = os.fstat(dir_fd)
    _give(dir_fd, top, owner, ours, since, result, label)
    _walk(dir_fd, top.st_dev, owner, ours, since, result, label, 0)
    return result


def _wanted(st: os.stat_result, owner: tuple[int, int], ours: set[int], since: float | None) -> bool:
    if (st.st_uid, st.st_gid) == owner:
        return False
    if st.st_uid not in ours and st.st_uid != owner[0]:
        return False  # someone else's file: not the run's
    return since is None or st.st_ctime >= since


def _give(fd: int, st: os.stat_result, owner: tuple[int, int], ours: set[int], since: float | None,
          result: HandBack, label: str) -> None:
    if not _wanted(st, owner, ours, since):
        return
    try:
        os.fchown(fd, *owner)
        result.changed += 1
    except OSError as exc:
        result.refused.append(f"{label}: {exc.strerror}")


def _walk(dir_fd: int, device: int, owner: tuple[int, int], ours: set[int], since: float | None,
          result: HandBack, label: str, depth: int) -> None:
    try:
        names = [entry.name for entry in os.scandir(dir_fd)]
    except OSError as exc:
        result.refused.append(f"{label}: cannot list ({exc.strerror})")
        return
    for name in names:
        path = f"{label}/{name}"
        try:
            listed = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISDIR(listed.st_mode):
            if listed.st_dev != device:
                result.refused.append(f"{path}: another file system (a mount point), not entered")
                continue
            if depth + 1 > MAX_DEPTH:
                result.refused.append(f"{path}: deeper than {MAX_DEPTH} levels, not entered")
                continue
            try:
                fd = open_dir(name, dir_fd=dir_fd)
            except OSError as exc:  # ELOOP/ENOTDIR: swapped for a link or a file since the listing
                result.refused.append(f"{path}: {exc.strerror}, not entered")
                continue
            try:
                opened = os.fstat(fd)
                if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
                    result.refused.append(f"{path}: replaced while being handed back, not entered")
                    continue
                _give(fd, opened, owner, ours, since, result, path)
                _walk(fd, device, owner, ours, since, result, path, depth + 1)
            finally:
                os.close(fd)
        elif stat.S_ISREG(listed.st_mode):
            if not _wanted(listed, owner, ours, since):
                continue
            try:
                fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT,):
                    result.refused.append(f"{path}: {exc.strerror}")
                continue
            try:
                opened = os.fstat(fd)
                if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
                    result.refused.append(f"{path}: replaced while being handed back, left alone")
                elif opened.st_nlink != 1:
                    result.refused.append(f"{path}: has {opened.st_nlink} links (may be a file outside the run), "
                                          "left alone")
                else:
                    _give(fd, opened, owner, ours, since, result, path)
            finally:
                os.close(fd)
        # symbolic links, devices, fifos, sockets: never followed, never changed
