"""`profilectl ls`: the runs under a traces folder, newest first, from their manifests alone.

A manifest that cannot be read is listed as `unreadable` with the reason; it never hides the
other runs. A manifest still `running` whose profilectl is gone (it no longer holds the run's lock;
for runs without one: its process, or its host's boot, is gone) is listed as `abandoned`, with
what the run left.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from profilectl import runs
from profilectl.errors import FormatError
from profilectl.manifest import Manifest

ABANDONED = "abandoned"


@dataclass(frozen=True)
class ListedRun:
    run: str
    path: str
    started_at: str
    service: str
    backend: str
    status: str
    wall_seconds: float | None
    workload: str
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_job(job_dir: Path) -> ListedRun:
    """A SLURM job's directory as one entry: its job status and how many ranks on which nodes."""
    from profilectl import jobs
    job = jobs.compose(job_dir)
    first = next((job_dir / r.run for r in job.ranks), None)
    try:
        manifest = Manifest.read(first) if first else None
    except FormatError:
        manifest = None
    walls = [m.wall_seconds for m in _manifests(job_dir, job) if m.wall_seconds is not None]
    return ListedRun(run=job_dir.name, path=str(job_dir), started_at=manifest.started_at if manifest else "",
                     service=job.service or "?", backend=manifest.backend if manifest else "?", status=job.status,
                     wall_seconds=max(walls) if walls else None,
                     workload=f"job {job.job_id}.{job.step_id}: {len(job.ranks)} ranks on {', '.join(job.nodes)}",
                     problem=job.message if job.status != "ok" else None)


def _manifests(job_dir: Path, job: Any) -> list[Manifest]:
    found = []
    for rank in job.ranks:
        try:
            found.append(Manifest.read(job_dir / rank.run))
        except FormatError:
            continue
    return found


def list_runs(traces_root: Path) -> list[ListedRun]:
    from profilectl import jobs
    listed = [list_job(p) for p in sorted(traces_root.iterdir()) if p.is_dir() and jobs.is_job_dir(p)]
    for manifest_path in traces_root.glob("*/manifest.json"):
        run_dir = manifest_path.parent
        try:
            manifest = Manifest.read(run_dir)
        except FormatError as exc:
            listed.append(ListedRun(run=run_dir.name, path=str(run_dir), started_at="", service="?", backend="?",
                                    status="unreadable", wall_seconds=None, workload="", problem=str(exc)))
            continue
        status, note = run_state(run_dir, manifest)
        listed.append(ListedRun(run=run_dir.name, path=str(run_dir), started_at=manifest.started_at,
                                service=manifest.service, backend=manifest.backend, status=status,
                                wall_seconds=manifest.wall_seconds, workload=" ".join(manifest.workload),
                                problem=note if status == ABANDONED else None))
    return sorted(listed, key=lambda r: (r.started_at, r.run), reverse=True)


def run_state(run_dir: Path, manifest: Manifest) -> tuple[str, str | None]:
    """The run's status as it stands now, and what to say about it: `abandoned` for a `running`
    manifest whose profilectl is gone, with what it left; `running` with who runs it."""
    if manifest.status != "running":
        return manifest.status, None
    gone = controller_gone(run_dir, manifest)
    if gone is None:
        who = f" (profilectl pid {manifest.controller.pid} on {manifest.controller.hostname})" \
            if manifest.controller else ""
        return "running", f"still running{who}"
    return ABANDONED, f"abandoned: {gone}; it left {what_it_left(run_dir)}"


def controller_gone(run_dir: Path, manifest: Manifest) -> str | None:
    """Why the run's profilectl is known to be gone, or None while it may still be running."""
    controller = manifest.controller
    who = f"profilectl (pid {controller.pid} on {controller.hostname})" if controller else "profilectl"
    alive = runs.controller_alive(run_dir)
    if alive is not None:
        return None if alive else f"{who} no longer holds the run's lock"
    if controller is None or controller.hostname != socket.gethostname():
        return None  # another host or container: its processes cannot be seen from here
    here = runs.boot_id()
    if controller.boot_id and here and controller.boot_id != here:
        return f"{controller.hostname} restarted since the run started"
    try:
        os.kill(controller.pid, 0)
    except ProcessLookupError:
        return f"{who} is gone"
    except PermissionError:
        pass  # exists, as another user
    try:
        started = datetime.fromisoformat(manifest.started_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if runs.process_started_after(controller.pid, started):
        return f"{who} is gone (its pid now belongs to another process)"
    return None


def what_it_left(run_dir: Path) -> str:
    """'stdout.log (12 B), raw/ (3 files, 1.1 MiB)': the run's files besides its manifest and env."""
    parts = []
    for entry in sorted(run_dir.iterdir()):
        if entry.name.startswith(".") or entry.name in ("manifest.json", "env.json"):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                sizes = [p.stat().st_size for p in entry.rglob("*") if p.is_file()]
                parts.append(f"{entry.name}/ ({len(sizes)} files, {runs.human_bytes(sum(sizes))})")
            else:
                parts.append(f"{entry.name} ({runs.human_bytes(entry.lstat().st_size)})")
        except OSError:
            parts.append(entry.name)
    return ", ".join(parts) or "no files besides its manifest"
