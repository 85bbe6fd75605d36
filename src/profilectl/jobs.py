"""A SLURM job as one run: profilectl started as every task of `srun -N2 -n4 profilectl trace -- …`.

Every task finds its place without talking to the others: the job directory's name comes from
SLURM's own identity of the job step (start time, job and step id), the same on every node, and
each rank claims its own sub-directory `<host>-rank<R>/`, a complete run directory. Nothing is
shared but the folder itself, so ranks cannot race. job.json is a view composed from the ranks'
own manifests, rewritten atomically by each rank as it ends (the last writer sees the most); `ls`
and `report` compose the same view afresh, so a rank on a lost node (its manifest stuck at
`running`, its lock released) is named even when nobody lived to rewrite job.json.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from profilectl.errors import FormatError
from profilectl.files import read_typed, write_json_atomic
from profilectl.runs import rank_of
from profilectl.runstate import run_state

JOB_MANIFEST = "job.json"
JOB_SCHEMA = 1


@dataclass(frozen=True)
class SlurmTask:
    """This process as one task of a SLURM job step, from the variables slurmd gives every task."""
    job_id: str
    step_id: str
    rank: int
    ntasks: int
    node: str
    cluster: str | None = None
    start: str | None = None  # the job's start, UTC, as the job directory's timestamp

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "SlurmTask | None":
        env = os.environ if env is None else env
        if not (env.get("SLURM_JOB_ID") and env.get("SLURM_PROCID") and env.get("SLURM_STEP_ID")):
            return None  # not a task of a job step (an sbatch script itself has no step)
        job_id = env["SLURM_JOB_ID"]
        return cls(job_id=job_id, step_id=env["SLURM_STEP_ID"], rank=int(env["SLURM_PROCID"]),
                   ntasks=int(env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or 1),
                   node=env.get("SLURMD_NODENAME") or socket.gethostname(), cluster=env.get("SLURM_CLUSTER_NAME"),
                   start=_job_start(job_id, env))

    def job_dir(self, traces_root: Path, service: str) -> Path:
        stamp = self.start or "00000000T000000Z"
        return traces_root / f"{stamp}-{service}-job{self.job_id}.{self.step_id}"

    def rank_dir(self, job_dir: Path) -> Path:
        return job_dir / f"{self.node}-rank{self.rank}"


def _job_start(job_id: str, env: Mapping[str, str]) -> str | None:
    """The job's start time: SLURM_JOB_START_TIME where slurmd sets it, else `scontrol show job`.
    Job ids start again at 1 on a new cluster: the start time keeps two jobs' folders apart."""
    epoch = env.get("SLURM_JOB_START_TIME", "")
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=10,
                               stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\bStartTime=(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)", shown)
    if not match:
        return None
    year, month, day, hour, minute, second = map(int, match.groups())
    local = datetime(year, month, day, hour, minute, second)  # scontrol prints the controller's local time
    return local.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


@dataclass(frozen=True)
class JobRank:
    """One rank of a SLURM job in job.json: its host, run folder and how its run ended (`lost`: no final manifest)."""
    rank: int
    host: str
    status: str  # the rank's run status; `lost` when it stopped without a final manifest
    run: str  # its directory, relative to the job directory
    exit_code: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class JobManifest:
    """job.json: a SLURM job step as its ranks' manifests say it: ids, nodes, every rank and the job's status."""
    schema_version: int
    job_id: str
    step_id: str
    service: str
    ntasks: int
    nodes: tuple[str, ...]
    ranks: tuple[JobRank, ...]
    status: str  # ok, running, failed (a rank failed or was lost), incomplete (ranks' folders elsewhere)
    message: str
    cluster: str | None = None
    updated_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def read(cls, job_dir: Path) -> "JobManifest":
        return read_typed(cls, job_dir / JOB_MANIFEST, "profilectl job manifest")


def rank_dirs(job_dir: Path) -> list[Path]:
    found = [p for p in job_dir.iterdir() if p.is_dir() and rank_of(p) and (p / "manifest.json").is_file()]
    return sorted(found, key=lambda p: rank_of(p) or (0, ""))


def is_job_dir(path: Path) -> bool:
    return path.is_dir() and ((path / JOB_MANIFEST).is_file() or bool(rank_dirs(path)))


def compose(job_dir: Path, task: SlurmTask | None = None) -> JobManifest:
    """The job as its ranks' manifests say now (a rank whose profilectl is gone: `lost`)."""
    from profilectl.manifest import Manifest  # here: `report` of a plain folder asks is_job_dir, nothing more
    previous = _previous(job_dir)
    ranks: list[JobRank] = []
    service = task_service = previous.service if previous else ""
    for rank_dir in rank_dirs(job_dir):
        rank, host = rank_of(rank_dir) or (0, "")
        try:
            manifest = Manifest.read(rank_dir)
        except FormatError as exc:
            ranks.append(JobRank(rank=rank, host=host, status="unreadable", run=rank_dir.name, message=str(exc)))
            continue
        service = manifest.service
        status, note = run_state(rank_dir, manifest)
        ranks.append(JobRank(rank=rank, host=host, status="lost" if status == "abandoned" else status, run=rank_dir.name,
                             exit_code=manifest.exit_code, message=note or manifest.message))
    ntasks = task.ntasks if task else (previous.ntasks if previous else len(ranks))
    job_id = task.job_id if task else (previous.job_id if previous else _name_part(job_dir, "job"))
    step_id = task.step_id if task else (previous.step_id if previous else "")
    status, message = _job_status(ranks, ntasks)
    return JobManifest(schema_version=JOB_SCHEMA, job_id=job_id, step_id=step_id, service=service or task_service,
                       ntasks=ntasks, nodes=tuple(sorted({r.host for r in ranks})), ranks=tuple(ranks), status=status,
                       message=message, cluster=task.cluster if task else (previous.cluster if previous else None),
                       updated_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def _previous(job_dir: Path) -> JobManifest | None:
    try:
        return JobManifest.read(job_dir)
    except FormatError:
        return None


def _name_part(job_dir: Path, prefix: str) -> str:
    match = re.search(rf"-{prefix}([\w.]+)$", job_dir.name)
    return match.group(1).split(".")[0] if match else job_dir.name


def missing_ranks(job: JobManifest) -> list[int]:
    return sorted(set(range(job.ntasks)) - {r.rank for r in job.ranks})


def _job_status(ranks: list[JobRank], ntasks: int) -> tuple[str, str]:
    """The job in one line: lost nodes, failed ranks grouped by node and cause, missing ranks."""
    missing = sorted(set(range(ntasks)) - {r.rank for r in ranks})
    bad = [r for r in ranks if r.status not in ("ok", "running")]
    groups: dict[tuple[str, str, str], list[int]] = {}
    for r in bad:
        cause = f"exit code {r.exit_code}" if r.exit_code not in (None, 0) else ""
        groups.setdefault((r.status, r.host, cause), []).append(r.rank)
    parts = []
    for (status, host, cause), numbers in sorted(groups.items(), key=lambda item: min(item[1])):
        what = "node " + host + " lost" if status == "lost" else f"{status} on {host}"
        parts.append(f"{'rank' if len(numbers) == 1 else 'ranks'} {_spans(numbers)}: {what}"
                     + (f" ({cause})" if cause else ""))
    if missing:
        seen = ", ".join(sorted({r.host for r in ranks})) or "no node"
        parts.append(f"rank(s) {_spans(missing)} left no run in this folder, which holds only {seen}'s ranks: "
                     "the traces folder is not shared between the nodes (use --traces-dir on a shared file "
                     "system, or copy every node's job folder here)")
    if bad:
        return "failed", "; ".join(parts)
    if missing:
        return "incomplete", "; ".join(parts)
    if any(r.status == "running" for r in ranks):
        return "running", f"{sum(r.status == 'running' for r in ranks)} of {ntasks} ranks still running"
    return "ok", f"{ntasks} ranks on {len({r.host for r in ranks})} node(s), all ok"


def _spans(numbers: list[int]) -> str:
    """0, 1, 2, 5 -> "0-2, 5": a thousand missing ranks stay one line."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def write(job_dir: Path, task: SlurmTask | None = None, wait_for_ranks_s: float = 0.0) -> JobManifest:
    """Compose the job's view and write it atomically (every rank does, as it ends). A rank that
    ends before another has even started would call the folder unshared, and one that ends first
    would only see the others running: it waits up to `wait_for_ranks_s` for every rank's directory
    to appear and every rank to end (ranks of one job end within moments of each other)."""
    job = compose(job_dir, task)
    deadline = time.monotonic() + wait_for_ranks_s
    while (missing_ranks(job) or job.status == "running") and time.monotonic() < deadline:
        time.sleep(0.5)
        job = compose(job_dir, task)
    write_json_atomic(job_dir / JOB_MANIFEST, job.to_dict())
    return job


def composed_from(job_dir: Path, ranks: list[JobRank], ntasks: int, views: list[JobManifest],
                  unreachable: Mapping[str, str]) -> JobManifest:
    """The job as several nodes saw it (`report --on-cluster`: each node's own folder holds its own
    ranks), with the nodes that could not be asked named first."""
    first = views[0] if views else None
    status, message = _job_status(ranks, ntasks)
    missing = sorted(set(range(ntasks)) - {r.rank for r in ranks})
    if unreachable:
        parts = [f"node {node} not reached ({why})" for node, why in sorted(unreachable.items())]
        if missing:
            parts.append(f"rank(s) {_spans(missing)} not reduced (their node was not reached)")
        done = [p for p in message.split("; ") if p and "left no run in this folder" not in p and status != "ok"]
        status, message = "failed", "; ".join(parts + done)
    elif missing:  # every node asked answered: the ranks are nowhere
        status, message = "incomplete", f"rank(s) {_spans(missing)} found on no node asked"
    return JobManifest(schema_version=JOB_SCHEMA, job_id=first.job_id if first else _name_part(job_dir, "job"),
                       step_id=first.step_id if first else "", service=first.service if first else "",
                       ntasks=ntasks, nodes=tuple(sorted({r.host for r in ranks} | set(unreachable))),
                       ranks=tuple(ranks), status=status, message=message,
                       cluster=first.cluster if first else None,
                       updated_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
