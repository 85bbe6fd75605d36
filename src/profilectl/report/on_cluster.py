"""`profilectl report JOB --on-cluster`: SLURM as the distributed reader. Each node that ran ranks of
the job reduces its own ranks' raw files into partials where they lie (node-local scratch before
the copy back, or a shared folder), as a job step of its own (`srun -w NODE ... profilectl report
JOB --reduce-here`); the partials come back on the step's stdout, and the submitting node merges
them. No daemon: one srun per node, run side by side, each ended with the report.

A node that cannot run the step (down, drained, unreachable) is named with srun's own words, and
the other nodes' numbers are kept.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, TextIO

from profilectl.errors import UnavailableError, UsageError

if TYPE_CHECKING:
    from profilectl.jobs import JobManifest
    from profilectl.report.partials import Partial
    from profilectl.report.summary import Summary

PARTIAL_LINE = "profilectl-partial "  # one rank's partial, base64 MessagePack
JOB_LINE = "profilectl-job "  # the node's view of the job (job.json), JSON
NODE_LINE = "profilectl-node "  # the node's name and the seconds it took, JSON
NOTE_LINE = "profilectl-note "  # a rank the node could not reduce, or read from its raw files, JSON text
IMMEDIATE_S = 30  # a node that cannot start the step in this time is named, not waited for
STEP_TIMEOUT_S = 3600


def step_argv(job_dir: Path, node: str, program: str = "profilectl") -> list[str]:
    """The job step that reduces `node`'s ranks of the job: one task on that node only; srun gives
    up after IMMEDIATE_S when the node cannot take it (down or drained) instead of waiting."""
    return ["srun", "--job-name=profilectl-reduce", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            f"--immediate={IMMEDIATE_S}", "--kill-on-bad-exit=1", "--quiet",
            program, "report", str(job_dir), "--reduce-here"]


def job_nodes(job_dir: Path, nodes: str | None) -> list[str]:
    """The nodes to reduce on: --nodes, else those the job folder names here (job.json, rank
    folders), else the job's node list from SLURM (`scontrol show job`)."""
    if nodes:
        return [n for n in nodes.split(",") if n]
    from profilectl import jobs
    if job_dir.is_dir() and jobs.is_job_dir(job_dir):
        found = list(jobs.compose(job_dir).nodes)
        if found:
            return found
    match = re.search(r"-job(\d+)\.\d+$", job_dir.name)
    if match and shutil.which("scontrol"):
        shown = subprocess.run(["scontrol", "show", "job", "-o", match.group(1)], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL).stdout
        listed = re.search(r"\bNodeList=(\S+)", shown)
        if listed and listed.group(1) != "(null)":
            names = subprocess.run(["scontrol", "show", "hostnames", listed.group(1)], capture_output=True,
                                   text=True, timeout=30, stdin=subprocess.DEVNULL).stdout.split()
            if names:
                return names
    raise UsageError(f"{job_dir}: no node of this job is known here: name them with --nodes node1,node2")


# ---------------------------------------------------------------- on each node
def reduce_here(job_dir: Path, out: TextIO) -> int:
    """The step's task: this node's ranks of the job reduced (partials stored beside their files
    where allowed) and written to `out`, one line each; the node's view of the job first."""
    from profilectl import jobs
    from profilectl.report import partials
    started = time.perf_counter()
    host = partials.local_host()
    found: list["Partial"] = []
    if job_dir.is_dir() and jobs.is_job_dir(job_dir):
        out.write(JOB_LINE + json.dumps(jobs.compose(job_dir).to_dict()) + "\n")
        found, problems = partials.on_this_node(job_dir)
        for partial in found:
            out.write(PARTIAL_LINE + base64.b64encode(partials.encode(partial)).decode("ascii") + "\n")
        for problem in problems:
            out.write(NOTE_LINE + json.dumps(problem) + "\n")
    out.write(NODE_LINE + json.dumps({"node": host, "ranks": len(found),
                                      "seconds": round(time.perf_counter() - started, 3)}) + "\n")
    out.flush()
    return 0


# ---------------------------------------------------------------- on the submitting node
@dataclass(frozen=True)
class NodeAnswer:
    node: str  # as asked (srun --nodelist)
    host: str | None  # as it named itself
    partials: tuple["Partial", ...]
    job: "JobManifest | None"
    seconds: float | None
    problem: str | None  # why it gave nothing: srun's last words
    notes: tuple[str, ...] = ()  # ranks it could not reduce, or rebuilt from their raw files


def parse(node: str, stdout: str, stderr: str, returncode: int) -> NodeAnswer:
    from profilectl.files import load_typed
    from profilectl.jobs import JobManifest
    from profilectl.report import partials
    found, job, host, seconds = [], None, None, None
    problems, notes = [], []
    for line in stdout.splitlines():
        try:
            if line.startswith(PARTIAL_LINE):
                found.append(partials.decode(base64.b64decode(line[len(PARTIAL_LINE):]), f"{node}'s partial"))
            elif line.startswith(JOB_LINE):
                job = load_typed(JobManifest, json.loads(line[len(JOB_LINE):]), f"{node}'s job.json", "job manifest")
            elif line.startswith(NOTE_LINE):
                notes.append(f"{node}: {json.loads(line[len(NOTE_LINE):])}")
            elif line.startswith(NODE_LINE):
                said = json.loads(line[len(NODE_LINE):])
                host, seconds = said.get("node"), said.get("seconds")
        except (ValueError, partials.PartialError) as exc:
            problems.append(str(exc))
    problem = None
    if host is None:
        words = [w for w in stderr.strip().splitlines() if w.strip()]
        problem = (f"srun exited {returncode}: {words[-1].strip()}" if words else f"srun exited {returncode}")
    elif problems:
        problem = "; ".join(problems[:3])
    return NodeAnswer(node=node, host=host, partials=tuple(found), job=job, seconds=seconds, problem=problem,
                      notes=tuple(notes))


def gather(job_dir: Path, nodes: list[str], program: str = "profilectl") -> list[NodeAnswer]:
    """One step per node, side by side; every one waited for (none outlives the report)."""
    if not shutil.which("srun"):
        raise UnavailableError("--on-cluster needs SLURM's srun on this machine (a login or compute node)")
    procs = [(node, subprocess.Popen(step_argv(job_dir, node, program), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)) for node in nodes]
    answers = []
    try:
        for node, proc in procs:
            try:
                out, err = proc.communicate(timeout=STEP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                err += f"\nno answer in {STEP_TIMEOUT_S} s"
            answers.append(parse(node, out, err, proc.returncode))
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return answers


def merge(job_dir: Path, answers: Iterable[NodeAnswer]) -> "Summary":
    """The job's summary from what the nodes sent: ranks in rank order, the nodes that answered and
    those that did not named in the job's story."""
    from profilectl import jobs
    from profilectl.report import partials
    from profilectl.report.load import job_summary
    answers = list(answers)
    views = [a.job for a in answers if a.job is not None]
    by_rank: dict[int, "Partial"] = {}
    for answer in answers:
        for partial in answer.partials:
            if partial.rank is not None:
                by_rank.setdefault(partial.rank.rank, partial)
    ranks = {r.rank: r for view in views for r in view.ranks}
    for number, partial in by_rank.items():
        ranks.setdefault(number, partials.rank_of_partial(partial))  # type: ignore[arg-type]
    ntasks = max([v.ntasks for v in views] + [len(ranks)])
    down = [a for a in answers if a.problem]
    job = jobs.composed_from(job_dir, sorted(ranks.values(), key=lambda r: r.rank), ntasks, views,
                             {a.node: a.problem or "" for a in down})
    results = [partials.RankResult(rank, by_rank[rank.rank], "partial") if rank.rank in by_rank else
               partials.RankResult(rank, None, "missing", f"rank {rank.rank} ({rank.host}): not reduced on its node: "
                                   "its numbers are missing")
               for rank in job.ranks]
    summary, notes = job_summary(job_dir, job, results)
    said = [f"reduced on {a.host or a.node}: {len(a.partials)} rank(s) in {a.seconds:.2f} s" for a in answers
            if not a.problem and a.seconds is not None]
    said += [f"node {a.node} not reached: {a.problem}; its ranks' numbers are missing" for a in down]
    said += [note for a in answers for note in a.notes]
    from profilectl.report.load import job_metadata
    return dataclasses.replace(summary, job=job, notes=tuple(said) + summary.notes + notes,
                               metadata=job_metadata(job_dir, job) if job_dir.is_dir() else None)
