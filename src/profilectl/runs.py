"""Run directories: collision-free creation, atomic manifests, and files handed to the host user.

traces/<UTC timestamp>-<service>-<short random id>/ is created with exclusive creation (mkdir fails
if it exists), so two runs started in the same second never share a directory.

While a run is under way its controller holds an exclusive lock on `<run>/.lock` (released by the
kernel when profilectl dies, however it dies), so `ls` and `report` can tell a live run from an
abandoned one, and keeps `<run>/.reserve`: space set aside at the start and freed only to write the
final manifest, so a run on a file system that fills up still ends with its final manifest.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from profilectl import settings
from profilectl.errors import DiskFullError, UsageError

if TYPE_CHECKING:
    from profilectl.manifest import OutputFile

TRACES_ENV = "PROFILECTL_TRACES_DIR"
LOCK_NAME = ".lock"
RESERVE_NAME = ".reserve"
RESERVE_BYTES = 256 * 1024  # the final manifest (with its outputs list) fits many times over
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# What a run writes at its top level (besides raw/, its profilers' own files): never to be
# overwritten by anything else, e.g. `report -o`.
RUN_FILES = frozenset({"manifest.json", "env.json", "summary.json", "stdout.log", "stderr.log", "kernels.csv",
                       "api.csv", "memory_copies.csv", "operators.csv", "counters.csv", "counters_by_kernel.csv",
                       "timing.csv", "telemetry.csv", "raw", LOCK_NAME, RESERVE_NAME})


@dataclass(frozen=True)
class Moment:
    """A moment of a run: its UTC wall time, for timestamps (started_at, the folder's name), and its
    monotonic reading, for durations. The difference of two moments is measured on the monotonic
    clock, so a wall-clock step during a run (NTP, an operator setting the date) never makes it last
    -3,592 s or 172,810 s."""
    wall: datetime
    monotonic: float

    def __sub__(self, earlier: "Moment") -> timedelta:
        return timedelta(seconds=self.monotonic - earlier.monotonic)

    def isoformat(self, timespec: str = "auto") -> str:
        return self.wall.isoformat(timespec=timespec)

    def strftime(self, layout: str) -> str:
        return self.wall.strftime(layout)


def now_utc() -> Moment:
    return Moment(datetime.now(timezone.utc), time.monotonic())


def iso(moment: datetime | Moment) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def default_traces_root() -> Path:
    return settings.get_path(TRACES_ENV) or Path("traces")


def run_name(service: str, moment: datetime | Moment, run_id: str) -> str:
    return f"{moment.strftime('%Y%m%dT%H%M%SZ')}-{service}-{run_id}"


def proposed_run_dir(traces_root: Path, service: str) -> Path:
    return traces_root / run_name(service, now_utc(), secrets.token_hex(3))


CLAIM_ATTEMPTS = 20


def claim(run_dir: Path) -> bool:
    """Create exactly this run directory (exclusive: mkdir fails if it exists). False if taken."""
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(f"cannot create the traces folder {run_dir.parent}: {no_space(run_dir.parent)}") from None
        raise UsageError(f"cannot create the traces folder {run_dir.parent}: {exc.strerror}") from None
    try:
        run_dir.mkdir()
    except FileExistsError:
        return False
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(f"cannot create a run directory: {no_space(run_dir.parent)}; nothing was run") from None
        raise UsageError(f"cannot create a run directory in {run_dir.parent}: {exc.strerror}") from None
    return True


_RANK_DIR = re.compile(r"^(?P<host>.+)-rank(?P<rank>\d+)$")


def rank_of(rank_dir: Path) -> tuple[int, str] | None:
    """(rank, host) of a SLURM rank directory's name, `<host>-rank<R>` (jobs.py names them)."""
    match = _RANK_DIR.match(rank_dir.name)
    return (int(match.group("rank")), match.group("host")) if match else None


def create_run_dir(traces_root: Path, service: str, first: Path | None = None) -> Path:
    """Claim a fresh run directory: `first` (a plan's proposed name) if still free, else a new name.
    A SLURM rank's folder (`<host>-rank<R>`, jobs.py) has no other name: ranks find each other by it,
    and a run under any other name in a job folder is seen by no `ls` or `report`. So when another
    profilectl claimed it first, this one stops (UsageError), never runs unseen."""
    candidate = first or proposed_run_dir(traces_root, service)
    if first is not None and rank_of(first) is not None:
        if claim(first):
            return first
        rank, host = rank_of(first) or (0, "")
        raise UsageError(f"{first} was claimed by another profilectl at the same moment: two tasks are rank {rank} "
                         f"on {host} of this job step (a launcher given the same SLURM_PROCID twice?); this one did "
                         "not run (give each task its own rank, or set PROFILECTL_NO_JOB=1 for runs of their own)")
    for _ in range(CLAIM_ATTEMPTS):
        if claim(candidate):
            return candidate
        candidate = proposed_run_dir(traces_root, service)
    raise UsageError(f"could not create a unique run directory in {traces_root}")


def enclosing_run(path: Path) -> Path | None:
    """The run directory that `path` (a file to write) would land in, if any."""
    for folder in [path.parent.resolve(), *path.parent.resolve().parents]:
        if (folder / "manifest.json").is_file():
            return folder
    return None


def output_files(run_dir: Path) -> tuple[OutputFile, ...]:
    from profilectl.manifest import OutputFile  # here: commands that only find a run do not import the manifest
    files = []
    for path in sorted(run_dir.rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            files.append(OutputFile(path=str(path.relative_to(run_dir)), bytes=path.stat().st_size))
    return tuple(files)


def host_owner(traces_root: Path) -> tuple[int, int] | None:
    """Who should own the outputs: $PROFILECTL_HOST_UID/GID, else the owner of the traces folder.

    In a container the profiler may run as root (capabilities only work for root), but the folder
    is mounted from the host and belongs to the user who ran compose: files are handed to them.
    """
    uid, gid = settings.get_int("PROFILECTL_HOST_UID"), settings.get_int("PROFILECTL_HOST_GID")
    if uid is not None:
        return uid, uid if gid is None else gid
    try:
        st = traces_root.stat()
    except OSError:
        return None
    return st.st_uid, st.st_gid


def hand_over(path: Path, owner: tuple[int, int] | None, recursive: bool = True) -> None:
    """chown `path` (and, when recursive, everything of ours under it) to the host user; only root
    can, and only root needs to. Never through a symbolic link: see ownership.hand_back."""
    if owner is None or os.geteuid() != 0 or owner == (0, 0):
        return
    from profilectl import ownership
    try:
        fd = ownership.open_dir(path)
    except NotADirectoryError:
        _hand_over_file(path, owner)
        return
    except OSError:  # gone, or a symbolic link (ELOOP): nothing of ours to give
        return
    try:
        if recursive:
            ownership.hand_back(fd, owner, label=str(path))
        else:
            st = os.fstat(fd)
            if st.st_uid in (0, os.geteuid()):
                os.fchown(fd, *owner)
    except OSError:
        pass
    finally:
        os.close(fd)


def _hand_over_file(path: Path, owner: tuple[int, int]) -> None:
    from profilectl import ownership
    try:
        fd = os.open(path, ownership.FILE_FLAGS)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_uid in (0, os.geteuid()):
            os.fchown(fd, *owner)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------ space
def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def no_space(folder: Path) -> str:
    """'no space left in FOLDER (12.0 KiB free of 1.0 MiB)': the folder and what its file system has."""
    try:
        usage = shutil.disk_usage(folder)
        free = f" ({human_bytes(usage.free)} free of {human_bytes(usage.total)})"
    except OSError:
        free = ""
    return f"no space left in {folder}{free}"


# ------------------------------------------------------------------ a run under way
class RunGuard:
    """The controller's hold on a run directory: the lock that says it is alive, the space reserve."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.lock_fd: int | None = None

    def lock(self) -> None:
        self.lock_fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def reserve(self) -> None:
        fd = os.open(self.run_dir / RESERVE_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks: a sparse file would reserve nothing
            except OSError as exc:
                if is_disk_full(exc):
                    raise
                if os.write(fd, bytes(RESERVE_BYTES)) < RESERVE_BYTES:  # file systems without fallocate
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from None
            os.fsync(fd)
        finally:
            os.close(fd)

    def release_reserve(self) -> None:
        try:
            os.unlink(self.run_dir / RESERVE_NAME)
        except OSError:  # gone, or the folder became read-only: the manifest's own write says which
            pass

    def close(self) -> None:
        """The run is final: nothing left to tell apart, so the lock file goes too."""
        self.release_reserve()
        if self.lock_fd is not None:
            try:
                os.unlink(self.run_dir / LOCK_NAME)
            except OSError:
                pass
            os.close(self.lock_fd)
            self.lock_fd = None


def open_run(run_dir: Path, write_first_files: Callable[[], None]) -> RunGuard:
    """Lock the new run directory, set space aside and write its first files (env.json, the
    `running` manifest). A full disk here ends the run before anything ran: the directory, which
    holds nothing but profilectl's own files, is removed and the error names the folder's space."""
    guard = RunGuard(run_dir)
    try:
        guard.lock()
        guard.reserve()
        write_first_files()
    except OSError as exc:
        guard.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        if is_disk_full(exc):
            raise DiskFullError(f"{no_space(run_dir.parent)}: nothing was run "
                                f"(free some space, or pass --traces-dir on another file system)") from None
        raise UsageError(f"cannot write the run directory {run_dir}: {exc.strerror or exc}") from None
    return guard


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def process_started_after(pid: int, moment: datetime) -> bool:
    """Whether process `pid` (on this host) started after `moment`: its pid was reused since."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return False
    ticks = int(stat[stat.rfind(")") + 2:].split()[19])  # field 22, starttime, in clock ticks after boot
    started = btime + ticks / os.sysconf("SC_CLK_TCK")
    return started > moment.timestamp() + 2  # btime has whole seconds


def controller_alive(run_dir: Path) -> bool | None:
    """Whether the profilectl that runs this directory still holds its lock: True, False, or None
    when that cannot be told (no lock file: an older or finished run; a lock file we cannot open)."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # also drops our shared lock, if we got it
    return False
