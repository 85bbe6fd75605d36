"""One merged timeline of a multi-rank job: every rank's torch.profiler (kineto) Chrome trace, or
rocprofv3's per-process outputs, cut to a window of steps, on one clock, as one Chrome/Perfetto
trace with a process track per rank.

How it reads (memory does not follow the job's size):
- Pass 1, one rank at a time, streamed in chunks (formats/chrome_io.py's chunker): the ProfilerStep#N
  ranges, the collectives (NCCL/RCCL kernels on the GPU; gloo/nccl/c10d operators on the CPU), the
  track names, and for every event 25 bytes (start, end, tier, estimated size) from which the
  rank's window and a histogram of its in-window bytes by duration are kept; the arrays are
  dropped before the next rank is read. rocprofv3's files (CSV, JSON, rocpd) go through
  profilectl's own reader of them, one rank at a time, as the kernels, copies, runtime calls and
  ProfilerStep markers of its timeline.
- Between the passes: the clock offset of every host, the size cap's cut, the straggler.
- Pass 2, one rank at a time again: the window's events, with pid, tid, flow ids and timestamps
  rewritten, streamed into the output.

Clocks. Ranks on one host share a clock (kineto's timestamps come from the host's clock); hosts do
not. A collective's k-th call ends at about the same moment on every rank (nobody leaves before
the last rank arrives and the data are through), while its start differs by each rank's wait: so
a host's offset is estimated from the ends of the collectives it shares with the reference host,
paired by (step number, name, k-th within the step): the median of (reference end - host end),
clamped into the interval causality allows (no rank leaves a collective before every rank has
entered it: offset <= reference end - host start and >= reference start - host end, over all
pairs). A host with no collective in common with the reference is placed by kineto's wall-clock
base (baseTimeNanoseconds, NTP accuracy), or left unshifted, and says so. The output is on the
clock of the straggler's host (the report's straggler: analysis/stragglers.py), in µs since
the window's earliest event. Offsets only: no drift over the window is modelled.

Size. The cap (default 100 MB of JSON, which Perfetto UI opens comfortably) is met by dropping
events, never the window: first the flow arrows, then CPU-side events from the shortest up, then
GPU events from the shortest up; step markers, collectives and track names are always kept. What
was dropped is said in the trace's metadata (`otherData`) and in the command's output.

The modules: read/rank_traces.py (the ranks, pass 1), read/clock_offsets.py (the hosts' offsets),
formats/chrome_raw.py (the events as written); here the straggler, the size cut and pass 2.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

import msgspec

from profilectl.errors import FormatError, UsageError
from profilectl.formats.chrome_io import is_gzip
from profilectl.formats.chrome_parallel import pool, workers_for
from profilectl.read.clock_offsets import HostOffset, estimate_offsets
from profilectl.read.rank_traces import (BINS, CPU, FLOW, GPU, KEPT, STEP, TIER_NAMES, LeftOut, RankInput, RankScan,
                                         bin_floor_ns, event_ns, find_ranks, rank_batches, scan, step_markers, tier_of)

if TYPE_CHECKING:
    from concurrent.futures import Future

DEFAULT_MAX_MB = 100
SIZE_MARGIN = 0.97  # the estimate of an event's bytes is close, not exact: plan below the cap
HEAD = b'{"traceEvents":[\n'
RETRIES = 2  # re-plans when the written file came out above the cap (the estimate was low)


@dataclass(frozen=True)
class MergedStraggler:
    """The report's straggler (analysis/stragglers.py judge: the rank the others wait for in
    collectives, per steady step), as the merge names it and puts the trace on its host's clock."""
    rank: int
    host: str
    lead_ns: int  # per steady step (median): the other ranks' time in collectives less its own
    steps_led: int  # steady steps (or collective calls) in which it was the one waited for
    steps: int  # steady steps judged (or collective calls, where the traces mark no steps)
    unit: str = "step"


def _waits(scan_: RankScan) -> Any:
    """The rank's steady steps and its time in collectives in each (stragglers.RankWaits)."""
    import numpy as np
    from profilectl.analysis.steps import steps_of
    from profilectl.analysis.stragglers import RankWaits, collective_units
    from profilectl.analysis.intervals import Blocks, union
    gpu = [c for c in scan_.collectives if c.on_gpu]
    chosen = gpu or [c for c in scan_.collectives if not c.on_gpu]  # as stragglers.py: NCCL/RCCL kernels first
    basis = "NCCL/RCCL kernels" if gpu else "host collectives (gloo/MPI)" if chosen else ""
    blocks = Blocks(union(np.array([c.start for c in chosen], dtype=np.int64),
                            np.array([c.end for c in chosen], dtype=np.int64)))
    steps = steps_of(step_markers(scan_))
    if not steps:  # no step marks: each collective call is a unit, as the report judges it
        return RankWaits(rank=str(scan_.rank.rank), host=scan_.rank.host, basis=basis,
                         steps=collective_units((blocks.start, blocks.end)), unit="collective")
    return RankWaits(rank=str(scan_.rank.rank), host=scan_.rank.host, basis=basis,
                     steps=tuple((w.step, w.start, w.end, blocks.within(w.start, w.end) if chosen else 0)
                                 for w in steps.steady))


def find_straggler(scans: Sequence[RankScan]) -> MergedStraggler | None:
    """The straggler by the report's one rule, from every rank's steps (not only the window's)."""
    from profilectl.analysis.stragglers import judge
    found = judge([_waits(s) for s in scans])
    if found is None or found.straggler is None:
        return None
    s = found.straggler
    host = next(scan.rank.host for scan in scans if str(scan.rank.rank) == s.rank)
    return MergedStraggler(int(s.rank), host, int(s.lead_ns), s.steps_led, s.steps,
                     "collective call" if found.unit == "collective" else "step")


# ---------------------------------------------------------------- the size cap
@dataclass(frozen=True)
class Cut:
    """Events dropped: every event of the tiers below `tier`, and those of `tier` in bins below `bin`."""
    tier: int = FLOW
    bin: int = 0

    def drops(self, tier: int, bin_: int) -> bool:
        return tier < self.tier or (tier == self.tier and bin_ < self.bin)

    def drops_event(self, tier: int, duration_ns: int) -> bool:
        """drops() for one event: bin b < self.bin is a duration below the bin's floor."""
        return tier < self.tier or (tier == self.tier and self.bin > 0 and duration_ns < bin_floor_ns(self.bin))

    def describe(self) -> str:
        if self.tier == FLOW and self.bin == 0:
            return "nothing dropped"
        parts = [f"all {TIER_NAMES[t]}" for t in range(self.tier)]
        if self.bin:
            parts.append(f"{TIER_NAMES[self.tier]} shorter than {_duration(bin_floor_ns(self.bin))}")
        return "dropped: " + ", ".join(parts)


def plan_cut(histogram: Any, fixed_bytes: int, budget: int) -> Cut:
    """The least dropping that brings the estimate under `budget`, in drop order (tier, then duration)."""
    total = fixed_bytes + int(histogram[:, :, 0].sum())
    if total <= budget:
        return Cut()
    for tier in (FLOW, CPU, GPU):
        for b in range(BINS):
            if total <= budget:
                return Cut(tier, b)
            total -= int(histogram[tier, b, 0])
    return Cut(KEPT, 0)


def _duration(ns: float) -> str:
    for unit, size in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= size:
            return f"{ns / size:.3g} {unit}"
    return f"{ns:.3g} ns"


# ---------------------------------------------------------------- pass 2: writing
@dataclass(frozen=True)
class MergePlan:
    """What pass 1 and the offsets decided, the same for every attempt at the size cap: the ranks to
    write, each host's clock offset, the output's time origin, and the figures the trace's metadata
    reports."""
    scans: Sequence[RankScan]
    offsets: dict[str, HostOffset]
    origin: int | None  # the window's earliest event on the output's clock: its timestamps count from it
    steps: tuple[int, int] | None
    left: Sequence[LeftOut]
    straggler: MergedStraggler | None
    clock_host: str  # whose clock the output is on
    cap: int  # bytes
    histogram: Any  # events and bytes per (tier, duration bin), for the cut
    workers: int


@dataclass(frozen=True)
class RankWritten:
    """One rank as merge-trace wrote it: its steps in the window, the clock offset applied, and its events in the
    window and written."""
    rank: int
    host: str
    steps: tuple[int, ...]
    offset_ns: int
    events_in_window: int
    events_written: int


@dataclass(frozen=True)
class MergedTrace:
    """What the merge did, as the command prints it and the trace's metadata says it."""
    output: str
    ranks: tuple[RankWritten, ...]
    left_out: tuple[LeftOut, ...]
    steps: tuple[int, int] | None
    offsets: tuple[HostOffset, ...]
    clock: str  # whose clock the output is on
    straggler: MergedStraggler | None
    events_in_window: int
    events_written: int
    dropped: dict[str, int]  # tier name -> events dropped
    cut: str
    bytes_written: int  # the JSON's bytes (before gzip)
    file_bytes: int
    cap_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Counting:
    """A binary file that counts what is written into it (the JSON's bytes, before any gzip)."""

    def __init__(self, fh: Any) -> None:  # a file or a GzipFile
        self.fh, self.written = fh, 0

    def write(self, data: bytes) -> None:
        self.written += len(data)
        self.fh.write(data)


def check_max_mb(max_mb: float) -> None:
    """--max-mb: a finite number of MB above 0 (NaN, infinity and negatives are usage errors)."""
    if not (isinstance(max_mb, (int, float)) and 0 < max_mb < math.inf):
        raise UsageError(f"--max-mb must be a number of MB more than 0, got {max_mb:g}")
    if int(max_mb * 1_000_000) < 1:
        raise UsageError(f"--max-mb {max_mb:g} is less than one byte")


def merge(path: Path, output: Path, steps: tuple[int, int] | None = None, max_mb: float = DEFAULT_MAX_MB,
          progress: Callable[[str], None] | None = None, workers: int | None = None) -> MergedTrace:
    """PATH's ranks as one trace at `output` (gzip when it ends in .gz); see the module's docstring.
    `workers`: processes reading ranks side by side (default: one per core for large jobs)."""
    say = progress or (lambda _: None)
    check_max_mb(max_mb)
    ranks, left = find_ranks(path)
    if not ranks:
        why = "; ".join(f"rank {x.rank}: {x.reason}" for x in left[:3])
        raise FormatError(f"{path}: no rank's torch.profiler trace or rocprofv3 output found"
                          + (f" ({why})" if why else ""))
    if output.exists() and any(_same(output, f) for r in ranks for f in r.files + r.timeline_files):
        raise UsageError(f"refusing to write {output}: it is a rank's own file that the merge reads")
    workers = _workers(ranks) if workers is None else max(1, workers)
    scans: list[RankScan] = []
    seen: set[int] = set()  # the steps the traces have, for the error when none is in the window
    for rank, found in zip(ranks, _in_order(_scan_or_error, [(rank, steps) for rank in ranks], workers)):
        if isinstance(found, str):  # one unreadable rank costs that rank only
            left.append(LeftOut(str(rank.rank), rank.host, f"unreadable: {found}"))
            say(f"rank {rank.rank} ({rank.host}) left out: unreadable: {found}")
            continue
        if not found.events:
            left.append(LeftOut(str(rank.rank), rank.host, "no timed event in its files"))
            continue
        have = sorted(set(found.steps_cpu) | set(found.steps_gpu))
        seen.update(have)
        if steps is not None and found.window is None:
            left.append(LeftOut(str(rank.rank), rank.host, f"no step in {steps[0]}:{steps[1]} (its steps: "
                                f"{_spans(have) or 'none'})"))
            continue
        scans.append(found)
    if not scans:
        if steps is not None and not any(x.reason.startswith("unreadable") for x in left):
            raise UsageError(f"--steps {steps[0]}:{steps[1]}: no rank has a step in that window (the traces' steps: "
                             f"{_spans(sorted(seen)) or 'none'})")
        raise FormatError(f"{path}: no rank could be read: " + "; ".join(f"rank {x.rank}: {x.reason}" for x in left[:3]))
    offsets = estimate_offsets(scans)
    straggler = find_straggler(scans)
    clock_host = straggler.host if straggler else scans[0].rank.host
    rebase = offsets[clock_host].offset_ns
    reference = scans[0].rank.host
    if rebase and offsets[reference].basis == "reference":
        offsets[reference] = HostOffset(reference, 0, f"the estimates' reference: placed by {clock_host}'s offset "
                                        "to it, reversed")
    offsets = {h: HostOffset(o.host, o.offset_ns - rebase, o.basis, o.pairs, o.spread_ns,
                             None if o.low_ns is None else o.low_ns - rebase,
                             None if o.high_ns is None else o.high_ns - rebase) for h, o in offsets.items()}
    starts = [s.first_ns + offsets[s.rank.host].offset_ns for s in scans if s.first_ns is not None]
    origin = min(starts) if starts else None
    import numpy as np
    histogram = sum((s.histogram for s in scans), np.zeros((3, BINS, 2), dtype=np.int64))
    fixed = sum(s.kept_bytes for s in scans) + 400 * sum(len(s.tracks) + 2 for s in scans) + 16384
    cap = int(max_mb * 1_000_000)
    budget = int(cap * SIZE_MARGIN)
    plan = MergePlan(scans=scans, offsets=offsets, origin=origin, steps=steps, left=left, straggler=straggler,
                     clock_host=clock_host, cap=cap, histogram=histogram, workers=workers)
    for _ in range(RETRIES + 1):
        cut = plan_cut(histogram, fixed, budget)
        result = _write(plan, cut, output)
        if result.bytes_written <= cap or cut.tier == KEPT:
            return result
        budget = int(budget * cap / result.bytes_written * SIZE_MARGIN)  # the estimate was low: plan tighter
    return result


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _scan_or_error(job: tuple[RankInput, tuple[int, int] | None]) -> RankScan | str:
    try:
        return scan(*job)
    except FormatError as exc:
        return str(exc)
    except (OverflowError, ValueError, RecursionError) as exc:  # one rank's odd file costs that rank only
        return f"{job[0].files[0] if job[0].files else 'its files'}: {type(exc).__name__}: {str(exc)[:200]}"


def _workers(ranks: Sequence[RankInput]) -> int:
    """One process per core (at most 8) for jobs large enough to gain from it: the ranks are read
    side by side, each one alone in its process (PROFILECTL_NO_PARALLEL: one after the other)."""
    size = 0
    for rank in ranks:
        for f in rank.files + rank.timeline_files:
            try:
                size += f.stat().st_size * (10 if is_gzip(f) else 1)  # torch traces inflate ~10x
            except OSError:
                pass
    return min(len(ranks), workers_for(size))


T = TypeVar("T")
J = TypeVar("J")


def _in_order(work: Callable[[J], T], jobs: Sequence[J], workers: int) -> Iterator[T]:
    """work(job) for every job, in order; in `workers` processes with a few jobs in flight, so that
    results wait for the writer in bounded number."""
    if workers <= 1 or len(jobs) < 2:
        yield from map(work, jobs)
        return
    from collections import deque
    with pool(workers) as executor:
        in_flight: deque[Future[T]] = deque()
        for job in jobs:
            in_flight.append(executor.submit(work, job))
            if len(in_flight) > workers + 1:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()


def _spans(numbers: Sequence[int]) -> str:
    from profilectl.jobs import _spans as spans
    return spans(list(numbers))


class OutputError(Exception):
    """Writing the merged trace failed (a full disk, a folder that cannot be written): `cause` says
    how; nothing was left behind."""

    def __init__(self, cause: OSError):
        super().__init__(str(cause))
        self.cause = cause


def _write(plan: MergePlan, cut: Cut, output: Path) -> MergedTrace:
    """The merged trace as `output`, whole or not at all (files.write_into: a temporary with an
    unpredictable name in the output's folder, renamed over it once complete; removed on a failure)."""
    from profilectl.files import write_into
    done: list[tuple[MergedTrace, int, int]] = []

    def write(fh: Any) -> None:
        result, json_bytes = _write_to(fh, output.name.endswith(".gz"), plan, cut, output)
        fh.flush()
        done.append((result, json_bytes, fh.tell()))
    try:
        write_into(output, write)
    except OSError as exc:
        raise OutputError(exc) from None
    result, json_bytes, file_bytes = done[0]
    return _with_sizes(result, json_bytes, file_bytes)


def _write_to(target: Any, gz: bool, plan: MergePlan, cut: Cut, output: Path) -> tuple[MergedTrace, int]:
    """The trace's bytes into the open binary file `target` (gzip'd when `gz`; the file stays open)."""
    import contextlib
    scans, offsets, origin, histogram = plan.scans, plan.offsets, plan.origin, plan.histogram
    encode = msgspec.json.Encoder().encode
    written: list[RankWritten] = []
    total_in = total_out = 0
    with (gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=target) if gz
          else contextlib.nullcontext(target)) as raw:
        out = _Counting(raw)
        out.write(HEAD)
        jobs = []
        for s in scans:
            offset = offsets[s.rank.host].offset_ns
            label = f"clock {'+' if offset >= 0 else ''}{offset / 1e6:.3f} ms" if offset else "reference clock"
            jobs.append((s, offset - (origin or 0), s.rank.rank + 1, cut, label))  # pid 0: Perfetto's idle task
        for s, (blob, kept) in zip(scans, _in_order(_rank_bytes, jobs, plan.workers)):
            out.write((b",\n" if out.written > len(HEAD) else b"") + blob)
            written.append(RankWritten(s.rank.rank, s.rank.host, s.window_steps, offsets[s.rank.host].offset_ns,
                                       s.in_window, kept))
            total_in += s.in_window
            total_out += kept
        dropped = {TIER_NAMES[t]: int(sum(histogram[t, b, 1] for b in range(BINS) if cut.drops(t, b)))
                   for t in (FLOW, CPU, GPU)}
        dropped = {k: v for k, v in dropped.items() if v}
        body_bytes = out.written
        clock = f"{plan.clock_host} (the straggler's host)" if plan.straggler else \
            f"{plan.clock_host} (the first rank's host)"
        result = MergedTrace(output=str(output), ranks=tuple(written), left_out=tuple(plan.left), steps=plan.steps,
                             offsets=tuple(offsets.values()), clock=clock, straggler=plan.straggler,
                             events_in_window=total_in, events_written=total_out, dropped=dropped,
                             cut=cut.describe(), bytes_written=0, file_bytes=0, cap_bytes=plan.cap)
        other = {"profilectl": "merged trace", "timestamps": "µs since the window's earliest event, on the clock of "
                 + result.clock, **{k: v for k, v in result.to_dict().items()
                                    if k not in ("bytes_written", "file_bytes", "output")}}
        tail = b'\n],"displayTimeUnit":"ns","otherData":' + encode(other) + b"}\n"
        out.write(tail)
    return result, body_bytes + len(tail)


def _with_sizes(result: MergedTrace, json_bytes: int, file_bytes: int) -> MergedTrace:
    from dataclasses import replace
    return replace(result, bytes_written=json_bytes, file_bytes=file_bytes)


def _rank_bytes(job: tuple[RankScan, int, int, Cut, str]) -> tuple[bytes, int]:
    """Pass 2 over one rank: its window's events, cut, shifted, on its own process track, and its
    tracks' names; as the output's JSON text (in a worker process where there are several)."""
    s, shift, pid, cut, label = job
    encode = msgspec.json.Encoder().encode
    parts: list[bytes] = []
    kept = _write_rank(s, shift, pid, cut, lambda event: parts.append(encode(event)))
    parts += [encode(event) for event in _rank_metadata(s, pid, label)]
    return b",\n".join(parts), kept


def _write_rank(s: RankScan, shift: int, pid: int, cut: Cut, emit: Callable[[dict[str, Any]], None]) -> int:
    low, high = s.window if s.window is not None else (-(1 << 62), 1 << 62)
    kept = 0
    step_of = STEP.match  # a local: a name imported from a module is called through LOAD_ATTR
    for file, events, _ in rank_batches(s.rank):
        for event in events:
            if event.ph == "M" or event.ts is None:
                continue
            name = event.name if isinstance(event.name, str) else str(event.name)
            t0 = event_ns(file, event, event.ts, "ts")
            dur = max(0, event_ns(file, event, event.dur, "dur")) if event.ph == "X" and event.dur is not None else 0
            if t0 + dur < low or t0 > high:
                continue
            tier = tier_of(event, name)
            if tier != KEPT and cut.drops_event(tier, dur):
                continue
            step = step_of(name) if tier == KEPT else None
            if step and s.window is not None and int(step.group(1)) not in s.window_steps:
                continue  # a step outside the window that reaches into it (torch 2.11's GPU-side step 0 spans all)
            out: dict[str, Any] = {"ph": event.ph, "name": name, "pid": pid,
                                   "tid": s.tracks.get((event.pid, event.tid), 0), "ts": (t0 + shift) / 1000}
            if event.cat is not None:
                out["cat"] = event.cat
            if event.ph == "X":
                out["dur"] = dur / 1000
            if event.id is not None:  # flow ids are per process in kineto: made unique per rank
                out["id"] = (s.rank.rank << 32) | event.id if isinstance(event.id, int) and 0 <= event.id < 1 << 32 \
                    else f"r{s.rank.rank}:{event.id}"
            if event.bp is not None:
                out["bp"] = event.bp
            if event.s is not None:
                out["s"] = "p" if event.s == "g" else event.s  # a global instant would mark every rank
            if event.args:
                out["args"] = event.args
            emit(out)
            kept += 1
    return kept


def _rank_metadata(s: RankScan, pid: int, clock: str) -> list[dict[str, Any]]:
    """The rank's process track (`rank N (host)`, sorted by rank, its clock offset as its label)
    and a named track per thread and stream: the CPU threads first, then the GPU streams."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {s.rank.rank} ({s.rank.host})"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": s.rank.rank}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": clock}}]
    for (src_pid, src_tid), tid in s.tracks.items():
        where = s.process_names.get(src_pid) or (f"pid {src_pid}" if src_pid not in ("", None) else "profiler")
        on_gpu = src_pid in s.gpu_pids
        thread = s.thread_names.get((src_pid, src_tid)) or (
            f"{'stream' if on_gpu else 'thread'} {src_tid}" if src_tid not in ("", None) else "events")
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"{where} · {thread}"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": (1_000_000 if on_gpu else 0) + tid}})
    return events


def lines(result: MergedTrace) -> list[str]:
    """The command's account of the merge, one fact a line."""
    shown = f"{result.output}: {len(result.ranks)} rank(s) as process tracks"
    if result.steps:
        shown += f", steps {result.steps[0]}:{result.steps[1]}"
    out = [shown + f", {result.bytes_written / 1e6:.3g} MB of JSON ({result.file_bytes / 1e6:.3g} MB on disk; "
           f"cap {result.cap_bytes / 1e6:g} MB)"]
    out.append(f"clock: {result.clock}; timestamps in µs since the window's earliest event")
    for o in result.offsets:
        bounds = f", causal bounds [{o.low_ns / 1e3:+.1f}, {o.high_ns / 1e3:+.1f}] µs" if o.low_ns is not None and \
            o.high_ns is not None else ""
        spread = f", spread ±{o.spread_ns / 1e3:.1f} µs" if o.pairs else ""
        out.append(f"offset {o.host}: {o.offset_ns / 1e3:+.1f} µs ({o.basis}{spread}{bounds})")
    if result.straggler:
        st = result.straggler
        out.append(f"straggler: rank {st.rank} ({st.host}): the others wait for it {st.lead_ns / 1e6:.2f} ms per {st.unit} "
                   f"in collectives ({st.steps_led} of {st.steps}; the report's rule)")
    out.append(f"events: {result.events_written} of {result.events_in_window} in the window; {result.cut}"
               + (" (" + ", ".join(f"{n} {what}" for what, n in result.dropped.items()) + ")" if result.dropped else ""))
    if result.bytes_written > result.cap_bytes:
        out.append(f"above the cap: the step markers and collectives alone take more; choose fewer steps (--steps) "
                   f"or a larger --max-mb")
    for x in result.left_out:
        out.append(f"rank {x.rank}{f' ({x.host})' if x.host else ''} left out: {x.reason}")
    return out
