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
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable, Iterator, TextIO, overload

from profilectl.errors import UnavailableError, UsageError

if TYPE_CHECKING:
    from profilectl.jobs import JobManifest, JobRank
    from profilectl.read.partials import Partial, RankIdentity
    from profilectl.read.summary import Summary

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
    from profilectl.read import partials
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
class SpooledPartials(Sequence["Partial"]):
    """A node's partials as they came: each one's JSON in an unnamed temporary file (never the node's
    whole output in memory: a node's 1.5 GiB of partials cost their own size on disk, one partial at
    a time in memory), decoded again when read; the rank each one claims is kept beside it."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._index: list[tuple[int, int]] = []
        self.claims: list["RankIdentity | None"] = []

    def add(self, data: bytes, claim: "RankIdentity | None") -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="profilectl-partials-")
        self._file.seek(0, os.SEEK_END)
        self._index.append((self._file.tell(), len(data)))
        self._file.write(data)
        self.claims.append(claim)

    def __len__(self) -> int:
        return len(self._index)

    @overload
    def __getitem__(self, index: int) -> "Partial": ...

    @overload
    def __getitem__(self, index: slice) -> "Sequence[Partial]": ...

    def __getitem__(self, index: int | slice) -> "Partial | Sequence[Partial]":
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        from profilectl.read import partials
        offset, size = self._index[index]
        assert self._file is not None
        self._file.seek(offset)
        return partials.decode(self._file.read(size), "a node's partial")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class NodeAnswer:
    """What one node's `--reduce-here` step gave back: its ranks' partials, the job as it saw it, how long it took,
    or why it gave nothing."""
    node: str  # as asked (srun --nodelist)
    host: str | None  # as it named itself
    partials: SpooledPartials
    job: "JobManifest | None"
    seconds: float | None
    problem: str | None  # why it gave nothing: srun's last words
    notes: tuple[str, ...] = ()  # ranks it could not reduce, or rebuilt from their raw files


STDERR_KEPT = 64 << 10  # of a step's stderr, the end: srun's last words


def parse(node: str, stdout: str | Iterable[str | bytes], stderr: str, returncode: int) -> NodeAnswer:
    """A node's answer from its step's output, line by line (`stdout`: the whole text, or its lines
    as they come: each partial is decoded, checked and spooled as it arrives)."""
    from profilectl.files import load_typed
    from profilectl.jobs import JobManifest
    from profilectl.read import partials
    found, job, host, seconds = SpooledPartials(), None, None, None
    problems, notes = [], []
    lines = stdout.splitlines() if isinstance(stdout, str) else stdout
    partial_prefix = PARTIAL_LINE.encode()
    for raw in lines:
        try:
            if (raw.startswith(partial_prefix) if isinstance(raw, bytes) else raw.startswith(PARTIAL_LINE)):
                # base64 skips the line's end; the line is let go before the next one is read
                data = base64.b64decode(raw[len(PARTIAL_LINE):])
                del raw
                partial = partials.decode(data, f"{node}'s partial")
                found.add(data, partial.rank)
                del partial, data
                continue
            line = (raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw).rstrip("\r\n")
            if line.startswith(JOB_LINE):
                job = load_typed(JobManifest, json.loads(line[len(JOB_LINE):]), f"{node}'s job.json", "job manifest")
            elif line.startswith(NOTE_LINE):
                notes.append(f"{node}: {str(json.loads(line[len(NOTE_LINE):]))[:1000]}")
            elif line.startswith(NODE_LINE):
                said = json.loads(line[len(NODE_LINE):])
                host, seconds = str(said.get("node")), said.get("seconds")
                seconds = float(seconds) if isinstance(seconds, (int, float)) else None
        except (ValueError, RecursionError, AttributeError, partials.PartialError) as exc:
            problems.append(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
    problem = None
    if host is None:
        words = [w for w in stderr.strip().splitlines() if w.strip()]
        problem = (f"srun exited {returncode}: {words[-1].strip()}" if words else f"srun exited {returncode}")
    elif problems:
        problem = "; ".join(problems[:3])
    return NodeAnswer(node=node, host=host, partials=found, job=job, seconds=seconds, problem=problem,
                      notes=tuple(notes))


def _tail(stream: IO[bytes], into: list[bytes]) -> None:
    """Read `stream` to its end, keeping its last STDERR_KEPT bytes."""
    kept = b""
    for chunk in iter(lambda: stream.read(8192), b""):
        kept = (kept + chunk)[-STDERR_KEPT:]
    into.append(kept)


def gather(job_dir: Path, nodes: list[str], program: str = "profilectl") -> list[NodeAnswer]:
    """One step per node, side by side, each one's output read as it comes (a thread per node):
    every one waited for, none outlives the report, and a node that does not answer in
    STEP_TIMEOUT_S is killed and named."""
    import threading
    if not shutil.which("srun"):
        raise UnavailableError("--on-cluster needs SLURM's srun on this machine (a login or compute node)")
    procs = [(node, subprocess.Popen(step_argv(job_dir, node, program), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)) for node in nodes]
    results: dict[str, NodeAnswer] = {}
    errs: dict[str, list[bytes]] = {node: [] for node in nodes}

    def read(node: str, proc: "subprocess.Popen[bytes]") -> None:
        assert proc.stdout is not None and proc.stderr is not None
        err = threading.Thread(target=_tail, args=(proc.stderr, errs[node]), daemon=True)
        err.start()
        answer = parse(node, proc.stdout, "", 0)
        err.join()
        code = proc.wait()
        stderr = b"".join(errs[node]).decode(errors="replace")
        if answer.host is None:  # no answer: srun's own words say why
            answer = dataclasses.replace(answer, problem=parse(node, "", stderr, code).problem)
        results[node] = answer

    readers = [threading.Thread(target=read, args=(node, proc), daemon=True) for node, proc in procs]
    deadline = time.monotonic() + STEP_TIMEOUT_S
    try:
        for thread in readers:
            thread.start()
        for (node, proc), thread in zip(procs, readers):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                proc.kill()
                thread.join()
                results[node] = dataclasses.replace(results.get(node) or parse(node, "", "", -9),
                                                    problem=f"no answer in {STEP_TIMEOUT_S} s")
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [results[node] for node in nodes]


def _short(name: str | None) -> str:
    """A host's short name (node1 for node1.cluster.example): srun's node names and hostnames differ so."""
    return (name or "").split(".")[0]


def merge(job_dir: Path, answers: Iterable[NodeAnswer]) -> "Summary":
    """The job's summary from what the nodes sent: ranks in rank order, the nodes that answered and
    those that did not named in the job's story.

    A node speaks for its own ranks only: a partial is taken from a node only for a rank that its own
    view of the job lists, on that node (its host is the node asked, or the name it gave itself),
    and, where this machine sees the job folder too, a rank that folder has on that host and within
    its tasks; any other claim (another node's rank, a rank that never ran) is refused and named."""
    from profilectl import jobs
    from profilectl.read import partials
    from profilectl.read.load import job_summary
    answers = list(answers)
    here = jobs.compose(job_dir) if job_dir.is_dir() and jobs.is_job_dir(job_dir) else None
    known = {r.rank: r for r in here.ranks} if here is not None else None
    views = [a.job for a in answers if a.job is not None]
    ntasks_said = [v.ntasks for v in views if v.ntasks > 0]
    limit = here.ntasks if here is not None else \
        (max(set(ntasks_said), key=lambda n: (ntasks_said.count(n), -n)) if ntasks_said else None)
    refused: list[str] = []
    by_rank: dict[int, tuple[NodeAnswer, int]] = {}
    ranks: dict[int, "JobRank"] = {}
    for answer in answers:
        own = {_short(answer.node), _short(answer.host)} - {""}
        view = {r.rank: r for r in answer.job.ranks} if answer.job is not None else {}
        for r in view.values():  # the node's word on its own ranks (status, run folder) only
            if _short(r.host) in own and (limit is None or 0 <= r.rank < limit) and \
                    (known is None or (r.rank in known and _short(known[r.rank].host) in own)):
                ranks.setdefault(r.rank, r)
        for index, claim in enumerate(answer.partials.claims):
            why = None
            if claim is None:
                why = "names no rank"
            elif claim.rank not in view:
                why = "not a rank of the node's own job folder"
            elif _short(claim.host) not in own or _short(view[claim.rank].host) not in own:
                why = f"a rank of {claim.host}, not of this node"
            elif limit is not None and not 0 <= claim.rank < limit:
                why = f"the job has {limit} rank(s)"
            elif known is not None and (claim.rank not in known or _short(known[claim.rank].host) not in own):
                why = "the job folder here has no such rank on this node"
            elif claim.rank in by_rank:
                why = f"already given by node {by_rank[claim.rank][0].node}"
            if why is not None:
                what = f"rank {claim.rank} ({claim.host})" if claim is not None else "a partial"
                refused.append(f"node {answer.node}: {what} refused: {why}")
                continue
            assert claim is not None
            by_rank[claim.rank] = (answer, index)
    for number, (answer, index) in by_rank.items():
        claim = answer.partials.claims[index]
        assert claim is not None
        ranks.setdefault(number, jobs.JobRank(rank=claim.rank, host=claim.host, status=claim.status, run=claim.run,
                                              exit_code=claim.exit_code, message=claim.message))
    ntasks = max([limit or 0, len(ranks)] + [r + 1 for r in ranks])
    down = [a for a in answers if a.problem]
    job = jobs.composed_from(job_dir, sorted(ranks.values(), key=lambda r: r.rank), ntasks, views,
                             {a.node: a.problem or "" for a in down})

    def results() -> Iterator[partials.RankResult]:  # one partial decoded at a time
        for rank in job.ranks:
            if rank.rank in by_rank:
                answer, index = by_rank[rank.rank]
                yield partials.RankResult(rank, answer.partials[index], "partial")
            else:
                yield partials.RankResult(rank, None, "missing", f"rank {rank.rank} ({rank.host}): not reduced on "
                                          "its node: its numbers are missing")
    summary, notes = job_summary(job_dir, job, results())
    taken = [sum(answer is a for answer, _ in by_rank.values()) for a in answers]
    said = [f"reduced on {a.host or a.node}: {n} rank(s) in {a.seconds:.2f} s" for a, n in zip(answers, taken)
            if not a.problem and a.seconds is not None]
    said += [f"node {a.node} not reached: {a.problem}; its ranks' numbers are missing" for a in down]
    said += [note for a in answers for note in a.notes]
    said += refused[:20] + ([f"... and {len(refused) - 20} more refused claims"] if len(refused) > 20 else [])
    from profilectl.read.load import job_metadata
    return dataclasses.replace(summary, job=job, notes=tuple(said) + summary.notes + notes,
                               metadata=job_metadata(job_dir, job) if job_dir.is_dir() else None)
