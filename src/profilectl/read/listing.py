"""`profilectl ls`: the runs under a traces folder, newest first, from their manifests alone.

A manifest that cannot be read is listed as `unreadable` with the reason; it never hides the
other runs. A manifest still `running` whose profilectl is gone (it no longer holds the run's lock;
for runs without one: its process, or its host's boot, is gone) is listed as `abandoned`, with
what the run left.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl import jobs
from profilectl.errors import FormatError, UsageError
from profilectl.runstate import ABANDONED, controller_gone, run_state, what_it_left  # noqa: F401  (their home)

if TYPE_CHECKING:
    from profilectl.manifest import Manifest


@dataclass(frozen=True)
class ListedRun:
    """One entry of `profilectl ls`: a run or SLURM job as its manifests say it (service, backend, status, wall time,
    workload), and any problem."""
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
    job = jobs.compose(job_dir)
    first = next((job_dir / r.run for r in job.ranks), None)
    try:
        manifest = _manifest(first) if first else None
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
            found.append(_manifest(job_dir / rank.run))
        except FormatError:
            continue
    return found


def _manifest(run_dir: Path) -> "Manifest":
    from profilectl.manifest import Manifest  # here: `report PATH` asks find_run, which lists nothing
    return Manifest.read(run_dir)


def list_runs(traces_root: Path) -> list[ListedRun]:
    listed = [list_job(p) for p in sorted(traces_root.iterdir()) if p.is_dir() and jobs.is_job_dir(p)]
    for manifest_path in traces_root.glob("*/manifest.json"):
        run_dir = manifest_path.parent
        try:
            manifest = _manifest(run_dir)
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


LATEST = "latest"  # the newest run of the traces folder, wherever a run is taken


def find_run(text: str, traces_root: Path) -> Path:
    """What `report`, `compare`, `query` and `merge-trace` take as a run: a path as it is; else a run
    id as `ls` prints it (a run or job folder of the traces folder); else `latest`, the newest run
    `ls` lists. A path that exists always wins over an id of the same name."""
    given = Path(text)
    if given.exists():
        return given
    if text == LATEST:
        listed = list_runs(traces_root) if traces_root.is_dir() else []
        if not listed:
            raise UsageError(f"latest: no run in {traces_root} yet (run `profilectl profile` first, or give a path)")
        return Path(listed[0].path)
    if text and "/" not in text and (traces_root / text).is_dir():
        return traces_root / text
    run = f", nor a run of {traces_root}" if "/" not in text else ""
    raise UsageError(f"{text} does not exist{run} (`profilectl ls` lists the runs; `latest` is the newest)")
