"""The ranks of a multi-rank job for `profilectl merge-trace`, and its pass 1 over each: where each
rank's torch.profiler traces (or rocprofv3 outputs) are (find_ranks), their events in batches
(rank_batches), and what is kept of a rank (scan: RankScan): its ProfilerStep#N ranges, its
collectives, its track names, and a histogram of its window's bytes by duration, from which
report/merged_trace.py plans the size cut and writes pass 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import msgspec

from profilectl.errors import FormatError
from profilectl.formats.chrome_decode import nanoseconds
from profilectl.formats.chrome_raw import RawEvent, iter_events
from profilectl.model.collectives import is_collective, is_host_collective

STEP = re.compile(r"^ProfilerStep#(\d+)$")
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_user_Annotation",
                            "Kernel", "Memcpy", "Memset"})
GPU_MARKER_CATEGORIES = frozenset({"gpu_user_annotation", "gpu_user_Annotation"})
FLOW_PHASES = frozenset({"s", "t", "f"})
# Drop order: flows first, then CPU-side events, then GPU events (each from the shortest up); kept always
FLOW, CPU, GPU, KEPT = 0, 1, 2, 3
TIER_NAMES = ("flow arrows", "CPU-side events", "GPU events", "")
BINS_PER_OCTAVE = 4
BINS = 1 + 48 * BINS_PER_OCTAVE  # bin 0: no duration; then 2**(b/4) ns up to 2**48 ns (~3 days)
EVENT_OVERHEAD = 96  # bytes of keys, ids and numbers around an event's name, category and args


# ---------------------------------------------------------------- inputs
@dataclass(frozen=True)
class RankInput:
    """One rank of a job for merge-trace: its number, its host and the files that hold its events."""
    rank: int
    host: str
    files: tuple[Path, ...]  # torch.profiler Chrome traces, streamed
    # other tools' per-process files (rocprofv3 CSV/JSON, rocpd): read through their readers'
    # timelines, one rank at a time (kernels, copies, runtime calls, ProfilerStep markers)
    timeline_files: tuple[Path, ...] = ()


@dataclass(frozen=True)
class LeftOut:
    """A rank that merge-trace leaves out (no trace found, no run left in the folder), and why."""
    rank: str
    host: str | None
    reason: str


def find_ranks(path: Path) -> tuple[list[RankInput], list[LeftOut]]:
    """The ranks of a SLURM job folder (its rank runs' raw/), a run directory's raw/, or a folder of
    per-rank torch traces named by rank (`<host>-rank<R>-<pid>.pt.trace.json[.gz]`). Ranks whose
    traces are missing come back as left out, named."""
    from profilectl import jobs
    from profilectl.formats.ranks import identity
    from profilectl.formats.reader import candidate_files
    from profilectl.formats.torch_trace import is_chrome_trace
    path = Path(path)
    if not path.exists():
        raise FormatError(f"{path} does not exist")
    if jobs.is_job_dir(path):
        found, left = [], []
        job = jobs.compose(path)
        for rank in job.ranks:
            raw = path / rank.run / "raw"
            files = candidate_files(raw) if raw.is_dir() else []
            traces = [f for f in files if is_chrome_trace(f)]
            others = _timeline_files([f for f in files if f not in traces])
            if traces or others:
                found.append(RankInput(rank.rank, rank.host, tuple(traces), tuple(others)))
            else:
                left.append(LeftOut(str(rank.rank), rank.host, f"no torch.profiler trace or rocprofv3 output in "
                                                                f"{rank.run}/raw (rank status: {rank.status})"))
        left += [LeftOut(str(r), None, "left no run in this folder") for r in jobs.missing_ranks(job)]
        return found, left
    folder = path / "raw" if (path / "manifest.json").is_file() and (path / "raw").is_dir() else path
    by_rank: dict[str, list[Path]] = {}
    other_by_rank: dict[str, list[Path]] = {}
    hosts: dict[str, str | None] = {}
    files = candidate_files(folder)
    traces = [f for f in files if is_chrome_trace(f)]
    for group, kept in ((traces, by_rank), (_timeline_files([f for f in files if f not in traces]), other_by_rank)):
        for file in group:
            named, host = identity(file)
            if not named.isdigit():  # a process id is unique on its host only (rocprofv3's <host>/<pid>_*.csv)
                named = f"{named} on {host}"
            kept.setdefault(named, []).append(file)
            by_rank.setdefault(named, [])
            hosts.setdefault(named, host)
    numbered = sorted(int(r) for r in by_rank if r.isdigit())
    # files that name no rank (a process id, a bare name): numbered after the ranks
    unnamed = sorted(r for r in by_rank if not r.isdigit())
    numbers = {str(n): n for n in numbered}
    numbers.update({name: (numbered[-1] + 1 if numbered else 0) + i for i, name in enumerate(unnamed)})
    return [RankInput(numbers[name], hosts[name] or "localhost", tuple(by_rank[name]),
                      tuple(other_by_rank.get(name, ()))) for name in [str(n) for n in numbered] + unnamed], []


def _timeline_files(files: list[Path]) -> list[Path]:
    """The files another tool's reader claims and whose tables carry timelines (rocprofv3's traces,
    rocpd databases), as profilectl's readers recognise them."""
    from profilectl.formats.registry import READERS
    from profilectl.formats.reader import claim
    wanted = ("rocprofv3-csv", "rocprofv3-json", "rocpd")  # the kinds with timestamps (not stats, not samples)
    return [f for reader, group in claim(files, READERS) if reader.kind in wanted for f in group]


def rank_batches(rank: RankInput) -> Iterator[tuple[Path, list[RawEvent], str]]:
    """Every event of a rank, in batches, with the file each came from and its document's head."""
    for file in rank.files:
        for events, head in iter_events(file):
            yield file, events, head
    if rank.timeline_files:
        where = rank.timeline_files[0]
        yield where, timeline_events(rank.timeline_files), ""


def timeline_events(files: Sequence[Path]) -> list[RawEvent]:
    """A process's rocprofv3 (or rocpd) files as trace events, through profilectl's own readers:
    kernels and copies per queue/stream on the GPU, runtime calls and ProfilerStep markers on the
    CPU (timestamps in ns, written as exact µs text)."""
    from profilectl.model.timeline import COPY
    from profilectl.formats.registry import READERS
    from profilectl.formats.reader import claim, read_groups
    events = [RawEvent(ph="M", name="process_labels", pid=pid, tid=0, args=msgspec.Raw(b'{"labels":"%s"}' % pid.encode()))
              for pid in ("CPU", "GPU")]
    for t in read_groups(claim(list(files), READERS)).timelines:
        names, streams = t.names, t.streams
        for start, end, stream, kind, name in zip(t.start.tolist(), t.end.tolist(), t.stream.tolist(),
                                                  t.kind.tolist(), t.name.tolist()):
            events.append(RawEvent(ph="X", cat="gpu_memcpy" if kind == COPY else "kernel", name=names[name], pid="GPU",
                                 tid=streams[stream], ts=_us_text(start), dur=_us_text(end - start)))
        for start, end in zip(t.api_start.tolist(), t.api_end.tolist()):
            events.append(RawEvent(ph="X", cat="cuda_runtime", name="runtime call", pid="CPU", tid="runtime calls",
                                 ts=_us_text(start), dur=_us_text(end - start)))
        for marker in t.markers:
            events.append(RawEvent(ph="X", cat="gpu_user_annotation" if marker.on_gpu else "user_annotation",
                                 name=marker.name, pid="GPU" if marker.on_gpu else "CPU", tid="markers",
                                 ts=_us_text(marker.start), dur=_us_text(marker.end - marker.start)))
    return events


def _us_text(ns: int) -> str:
    """Integer ns as µs text with three decimals: read back exactly (no double in between)."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"


CLOCK_LIMIT_NS = 1 << 61  # ~73 years either side of a clock's zero: room for any sum of two without overflow


def event_ns(path: Path, event: RawEvent, value: Any, what: str) -> int:
    """µs to integer ns, as chrome_decode.nanoseconds reads them (its general path for text and odd values);
    FormatError for a time no clock gives (|t| beyond CLOCK_LIMIT_NS): that rank is left out, named."""
    if type(value) is float and -9.2e15 < value < 9.2e15:  # the common case, inline: nanoseconds' arithmetic
        whole = int(value)
        found = whole * 1000 + round((value - whole) * 1000)
    else:
        found = nanoseconds(str(path), event, value, what)
    if not -CLOCK_LIMIT_NS < found < CLOCK_LIMIT_NS:
        shown = str(value)[:40]
        raise FormatError(f"{path}: event {str(event.name)[:80]!r} has {what} {shown} µs, out of any clock's range")
    return found


# ---------------------------------------------------------------- pass 1: one rank's scan
@dataclass
class Collective:
    """One collective of a rank as merge-trace's pass 1 keeps it: name, start and end (ns), on the GPU or the host."""
    name: str
    start: int
    end: int
    on_gpu: bool


@dataclass
class RankScan:
    """What pass 1 keeps of a rank: small (markers, collectives, names, a histogram)."""
    rank: RankInput
    steps_cpu: dict[int, tuple[int, int]] = field(default_factory=dict)
    steps_gpu: dict[int, tuple[int, int]] = field(default_factory=dict)
    collectives: list[Collective] = field(default_factory=list)
    tracks: dict[tuple[Any, Any], int] = field(default_factory=dict)  # (pid, tid) -> tid in the output
    process_names: dict[Any, str] = field(default_factory=dict)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    gpu_pids: set[Any] = field(default_factory=set)
    base_ns: int | None = None  # kineto's baseTimeNanoseconds: the clock's epoch (wall clock)
    window: tuple[int, int] | None = None
    window_steps: tuple[int, ...] = ()
    events: int = 0
    in_window: int = 0
    first_ns: int | None = None  # the earliest start of an event in the window (one may start before it)
    kept_bytes: int = 0  # estimated bytes of the events never dropped (markers, collectives)
    histogram: Any = None  # numpy [tier, bin] -> (bytes, count) of droppable in-window events

    def track(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        if key not in self.tracks:
            self.tracks[key] = len(self.tracks) + 1
        return self.tracks[key]


_BASE = re.compile(r'"baseTimeNanoseconds"\s*:\s*(\d+)')


_TIERS: dict[tuple[Any, Any, str], int] = {}  # names repeat: each (phase, category, name) is matched once


def tier_of(event: RawEvent, name: str) -> int:
    key = (event.ph, event.cat, name)
    found = _TIERS.get(key)
    if found is None:
        if event.ph in FLOW_PHASES:
            found = FLOW
        elif event.ph == "X" and (STEP.match(name) or _is_collective(event, name)):
            found = KEPT
        else:
            found = GPU if event.cat in GPU_CATEGORIES else CPU
        if len(_TIERS) < 1 << 20:
            _TIERS[key] = found
    return found


def _is_collective(event: RawEvent, name: str) -> bool:
    if event.cat in ("kernel", "Kernel"):
        return is_collective(name)
    return event.cat not in GPU_CATEGORIES and is_host_collective(name)


def _size(event: RawEvent, name: str) -> int:
    return EVENT_OVERHEAD + len(name) + (len(event.cat) if isinstance(event.cat, str) else 8) + \
        len(event.args)


def _bin(durations: Any) -> Any:
    import numpy as np
    d = np.maximum(durations, 0).astype(np.float64)
    return np.where(d > 0, 1 + np.floor(BINS_PER_OCTAVE * np.log2(np.maximum(d, 1.0))), 0).clip(0, BINS - 1) \
        .astype(np.int64)


def bin_floor_ns(b: int) -> float:
    """The shortest duration of histogram bin b."""
    return 0.0 if b == 0 else 2 ** ((b - 1) / BINS_PER_OCTAVE)


def scan(rank: RankInput, steps: tuple[int, int] | None) -> RankScan:
    import numpy as np
    from array import array
    result = RankScan(rank)
    start, end, size = array("q"), array("q"), array("l")
    tier = bytearray()
    for file, events, head in rank_batches(rank):
        if result.base_ns is None and (found := _BASE.search(head)):
            result.base_ns = int(found.group(1))
        for event in events:
            name = event.name if isinstance(event.name, str) else str(event.name)
            if event.ph == "M":
                _metadata(result, event)
                continue
            if event.ts is None:
                continue
            t0 = event_ns(file, event, event.ts, "ts")
            t1 = t0 + max(0, event_ns(file, event, event.dur, "dur")) if event.ph == "X" and event.dur is not None \
                else t0
            result.track(event.pid, event.tid)
            if event.cat in GPU_CATEGORIES:
                result.gpu_pids.add(event.pid)
            kind = tier_of(event, name)
            if kind == KEPT:
                step = STEP.match(name)
                if step:
                    table = result.steps_gpu if event.cat in GPU_MARKER_CATEGORIES else result.steps_cpu
                    have = table.get(int(step.group(1)))
                    # torch may split a GPU-side step range per stream: one step spans its pieces
                    table[int(step.group(1))] = (t0, t1) if have is None else (min(have[0], t0), max(have[1], t1))
                else:
                    result.collectives.append(Collective(name, t0, t1, event.cat in ("kernel", "Kernel")))
            start.append(t0)
            end.append(t1)
            tier.append(kind)
            size.append(_size(event, name))
            result.events += 1
    result.window, result.window_steps = _window(result, steps)
    s, e = np.frombuffer(start, dtype=np.int64), np.frombuffer(end, dtype=np.int64)
    t, z = np.frombuffer(bytes(tier), dtype=np.int8), np.frombuffer(size, dtype=np.int64 if size.itemsize == 8 else
                                                                     np.int32).astype(np.int64)
    inside = np.ones(len(s), dtype=bool) if result.window is None else \
        (e >= result.window[0]) & (s <= result.window[1])
    result.in_window = int(inside.sum())
    result.first_ns = int(s[inside].min()) if result.in_window else None
    result.kept_bytes = int(z[inside & (t == KEPT)].sum())
    histogram = np.zeros((3, BINS, 2), dtype=np.int64)
    droppable = inside & (t != KEPT)
    bins = _bin(e[droppable] - s[droppable])
    tiers = t[droppable].astype(np.int64)
    np.add.at(histogram, (tiers, bins, 0), z[droppable])
    np.add.at(histogram, (tiers, bins, 1), 1)
    result.histogram = histogram
    return result


def _metadata(result: RankScan, event: RawEvent) -> None:
    if not event.args:
        return
    try:
        args = msgspec.json.decode(event.args)
    except msgspec.DecodeError:
        return
    if not isinstance(args, dict):
        return
    if event.name == "process_labels" and isinstance(args.get("labels"), str):
        result.process_names[event.pid] = args["labels"]  # kineto: "CPU", "GPU 0": says more than "python"
    elif event.name == "process_name" and isinstance(args.get("name"), str):
        result.process_names.setdefault(event.pid, args["name"])
    elif event.name == "thread_name" and isinstance(args.get("name"), str):
        result.thread_names[(event.pid, event.tid)] = args["name"]


def _window(result: RankScan, steps: tuple[int, int] | None) -> tuple[tuple[int, int] | None, tuple[int, ...]]:
    """The rank's window on its own clock: from the start of step A to the end of step B-1, CPU side
    and GPU side together (the GPU finishes a step's work after the CPU has moved on)."""
    if steps is None:
        return None, tuple(sorted(set(result.steps_cpu) | set(result.steps_gpu)))
    wanted = [n for n in sorted(set(result.steps_cpu) | set(result.steps_gpu)) if steps[0] <= n < steps[1]]
    if not wanted:
        return None, ()
    ranges = [r[n] for r in (result.steps_cpu, result.steps_gpu) for n in wanted if n in r]
    return (min(a for a, _ in ranges), max(b for _, b in ranges)), tuple(wanted)


def step_markers(scan_: RankScan) -> list[Any]:
    from profilectl.model.timeline import Marker
    return [Marker(f"ProfilerStep#{n}", a, b, False) for n, (a, b) in scan_.steps_cpu.items()] + \
        [Marker(f"ProfilerStep#{n}", a, b, True) for n, (a, b) in scan_.steps_gpu.items()]
