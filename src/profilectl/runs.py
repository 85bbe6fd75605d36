"""Run directories: collision-free creation, atomic manifests, and files handed to the host user.

traces/<UTC timestamp>-<service>-<short random id>/ is created with exclusive creation (mkdir fails
if it exists), so two runs started in the same second never share a directory.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from profilectl.errors import UsageError
from profilectl.manifest import OutputFile

TRACES_ENV = "PROFILECTL_TRACES_DIR"


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def default_traces_root() -> Path:
    return Path(os.environ.get(TRACES_ENV) or "traces")


def run_name(service: str, moment: datetime, run_id: str) -> str:
    return f"{moment.strftime('%Y%m%dT%H%M%SZ')}-{service}-{run_id}"


def proposed_run_dir(traces_root: Path, service: str) -> Path:
    return traces_root / run_name(service, now_utc(), secrets.token_hex(3))


CLAIM_ATTEMPTS = 20


def claim(run_dir: Path) -> bool:
    """Create exactly this run directory (exclusive: mkdir fails if it exists). False if taken."""
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the traces folder {run_dir.parent}: {exc.strerror}") from None
    try:
        run_dir.mkdir()
    except FileExistsError:
        return False
    except OSError as exc:
        raise UsageError(f"cannot create a run directory in {run_dir.parent}: {exc.strerror}") from None
    return True


def create_run_dir(traces_root: Path, service: str, first: Path | None = None) -> Path:
    """Claim a fresh run directory: `first` (a plan's proposed name) if still free, else a new name."""
    candidate = first or proposed_run_dir(traces_root, service)
    for _ in range(CLAIM_ATTEMPTS):
        if claim(candidate):
            return candidate
        candidate = proposed_run_dir(traces_root, service)
    raise UsageError(f"could not create a unique run directory in {traces_root}")


def output_files(run_dir: Path) -> tuple[OutputFile, ...]:
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
    uid, gid = os.environ.get("PROFILECTL_HOST_UID"), os.environ.get("PROFILECTL_HOST_GID")
    if uid and uid.isdigit():
        return int(uid), int(gid) if gid and gid.isdigit() else int(uid)
    try:
        st = traces_root.stat()
    except OSError:
        return None
    return st.st_uid, st.st_gid


def hand_over(path: Path, owner: tuple[int, int] | None) -> None:
    """chown the run directory to the host user; only root can, and only root needs to."""
    if owner is None or os.geteuid() != 0 or owner == (0, 0):
        return
    for item in [path, *path.rglob("*")]:
        try:
            os.lchown(item, *owner)
        except OSError:
            pass
