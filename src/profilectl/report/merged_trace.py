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
"""

from __future__ import annotations

import gzip
import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

import msgspec

from profilectl.errors import FormatError, UsageError
from profilectl.model.collectives import is_collective, is_host_collective
from profilectl.formats import chrome_decode, chrome_io, chrome_parallel

if TYPE_CHECKING:
    from concurrent.futures import Future

DEFAULT_MAX_MB = 100
SIZE_MARGIN = 0.97  # the estimate of an event's bytes is close, not exact: plan below the cap
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
HEAD = b'{"traceEvents":[\n'
RETRIES = 2  # re-plans when the written file came out above the cap (the estimate was low)


# ---------------------------------------------------------------- inputs
@dataclass(frozen=True)
class RankInput:
    rank: int
    host: str
    files: tuple[Path, ...]  # torch.profiler Chrome traces, streamed
    # other tools' per-process files (rocprofv3 CSV/JSON, rocpd): read through their readers'
    # timelines, one rank at a time (kernels, copies, runtime calls, ProfilerStep markers)
    timeline_files: tuple[Path, ...] = ()


@dataclass(frozen=True)
class LeftOut:
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


# ---------------------------------------------------------------- decoding
class _Event(msgspec.Struct, gc=False, omit_defaults=True):
    """One trace event as read and written: the fields rewritten here typed loosely (kineto writes
    pid and tid as numbers or strings), `args` carried through as its own bytes, never parsed."""
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    bp: Any = None
    s: Any = None
    args: msgspec.Raw = msgspec.Raw()  # empty where the event has none (Raw takes no None in a union)


_PLAIN = msgspec.json.Decoder(list[_Event])
_EXACT = None  # built on first need: ts kept as text where a double would lose its ns


def _decode(buffer: bytes | bytearray) -> list[_Event]:
    """`[` + events + `]`; timestamps exact to the ns (chrome_decode's rule for large clocks)."""
    global _EXACT
    if chrome_decode.needs_exact(buffer):
        if _EXACT is None:
            _EXACT = msgspec.json.Decoder(list[_Event], float_hook=chrome_decode.exact_float)
        return _EXACT.decode(buffer)
    return _PLAIN.decode(buffer)


def iter_events(path: Path) -> Iterator[tuple[list[_Event], str]]:
    """Batches of a Chrome trace's events, streamed in chunks, and the document's head (the text
    before the events array: kineto's baseTimeNanoseconds is there or after the array). A chunk cut
    at a false boundary (inside a string) is joined with the next one; a file that does not decode
    to its end is a FormatError naming it."""
    cs = chrome_io
    with cs.open_stream(path) as fh:
        layout, first = cs.find_events(path, fh)
        gz = cs.is_gzip(path)
        size = path.stat().st_size
        tasks = cs.chunk_tasks(path, fh, layout, first, size, cs.CHUNK_MIN, True, seekable=not gz)
        pending: bytearray | None = None
        for task in tasks:
            body = cs.chunk_bytes(task)[1:-1]  # the chunk without the added brackets
            data = body if pending is None else pending + b"," + body
            if task.last:
                events, tail = _last(path, data)
                yield events, layout.head + tail
                cs.check_document(path, layout, tail)
                return
            try:
                events = _decode(b"[" + data + b"]")
            except msgspec.DecodeError:
                pending = data  # a guessed boundary inside a string: decode it with the next chunk
                cs.bound_event(path, len(pending), cs.limit_of("MAX_EVENT_BYTES", cs.MAX_EVENT_BYTES))
                continue
            except msgspec.ValidationError as exc:
                raise FormatError(f"{path}: not a Chrome trace event list: {exc}") from None
            pending = None
            yield events, layout.head
    raise FormatError(f"{path}: not valid JSON (truncated?): the events array does not end")


def rank_batches(rank: RankInput) -> Iterator[tuple[Path, list[_Event], str]]:
    """Every event of a rank, in batches, with the file each came from and its document's head."""
    for file in rank.files:
        for events, head in iter_events(file):
            yield file, events, head
    if rank.timeline_files:
        where = rank.timeline_files[0]
        yield where, timeline_events(rank.timeline_files), ""


def timeline_events(files: Sequence[Path]) -> list[_Event]:
    """A process's rocprofv3 (or rocpd) files as trace events, through profilectl's own readers:
    kernels and copies per queue/stream on the GPU, runtime calls and ProfilerStep markers on the
    CPU (timestamps in ns, written as exact µs text)."""
    from profilectl.model.timeline import COPY
    from profilectl.formats.registry import READERS
    from profilectl.formats.reader import claim, read_groups
    events = [_Event(ph="M", name="process_labels", pid=pid, tid=0, args=msgspec.Raw(b'{"labels":"%s"}' % pid.encode()))
              for pid in ("CPU", "GPU")]
    for t in read_groups(claim(list(files), READERS)).timelines:
        names, streams = t.names, t.streams
        for start, end, stream, kind, name in zip(t.start.tolist(), t.end.tolist(), t.stream.tolist(),
                                                  t.kind.tolist(), t.name.tolist()):
            events.append(_Event(ph="X", cat="gpu_memcpy" if kind == COPY else "kernel", name=names[name], pid="GPU",
                                 tid=streams[stream], ts=_us_text(start), dur=_us_text(end - start)))
        for start, end in zip(t.api_start.tolist(), t.api_end.tolist()):
            events.append(_Event(ph="X", cat="cuda_runtime", name="runtime call", pid="CPU", tid="runtime calls",
                                 ts=_us_text(start), dur=_us_text(end - start)))
        for marker in t.markers:
            events.append(_Event(ph="X", cat="gpu_user_annotation" if marker.on_gpu else "user_annotation",
                                 name=marker.name, pid="GPU" if marker.on_gpu else "CPU", tid="markers",
                                 ts=_us_text(marker.start), dur=_us_text(marker.end - marker.start)))
    return events


def _us_text(ns: int) -> str:
    """Integer ns as µs text with three decimals: read back exactly (no double in between)."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"


def _last(path: Path, data: bytes | bytearray) -> tuple[list[_Event], str]:
    """The last chunk holds the array's `]` and the document's tail: the `]` is the last one after
    which the text before it decodes as events (tried from the end; a `]` inside the tail fails)."""
    at = len(data)
    for _ in range(64):
        at = data.rfind(b"]", 0, at)
        if at < 0:
            break
        try:
            events = _decode(b"[" + data[:at] + b"]") if data[:at].strip() else []
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        try:
            return events, bytes(data[at + 1:]).decode()
        except UnicodeDecodeError:
            raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None
    raise FormatError(f"{path}: not valid JSON (truncated?): the events array does not end")


CLOCK_LIMIT_NS = 1 << 61  # ~73 years either side of a clock's zero: room for any sum of two without overflow


def _ns(path: Path, event: _Event, value: Any, what: str) -> int:
    """µs to integer ns, as chrome_decode.nanoseconds reads them (its general path for text and odd values);
    FormatError for a time no clock gives (|t| beyond CLOCK_LIMIT_NS): that rank is left out, named."""
    if type(value) is float and -9.2e15 < value < 9.2e15:  # the common case, inline: nanoseconds' arithmetic
        whole = int(value)
        found = whole * 1000 + round((value - whole) * 1000)
    else:
        found = chrome_decode.nanoseconds(str(path), event, value, what)
    if not -CLOCK_LIMIT_NS < found < CLOCK_LIMIT_NS:
        shown = str(value)[:40]
        raise FormatError(f"{path}: event {str(event.name)[:80]!r} has {what} {shown} µs, out of any clock's range")
    return found


# ---------------------------------------------------------------- pass 1: one rank's scan
@dataclass
class Collective:
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


def _tier(event: _Event, name: str) -> int:
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


def _is_collective(event: _Event, name: str) -> bool:
    if event.cat in ("kernel", "Kernel"):
        return is_collective(name)
    return event.cat not in GPU_CATEGORIES and is_host_collective(name)


def _size(event: _Event, name: str) -> int:
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
            t0 = _ns(file, event, event.ts, "ts")
            t1 = t0 + max(0, _ns(file, event, event.dur, "dur")) if event.ph == "X" and event.dur is not None \
                else t0
            result.track(event.pid, event.tid)
            if event.cat in GPU_CATEGORIES:
                result.gpu_pids.add(event.pid)
            kind = _tier(event, name)
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


def _metadata(result: RankScan, event: _Event) -> None:
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


# ---------------------------------------------------------------- clocks
@dataclass(frozen=True)
class HostOffset:
    host: str
    offset_ns: int  # added to the host's timestamps to put them on the output's clock
    basis: str  # how it was estimated, in words
    pairs: int = 0  # collectives paired with the reference host
    spread_ns: int = 0  # median absolute deviation of the pairs' estimates
    low_ns: int | None = None  # the interval causality allows (None: not bounded)
    high_ns: int | None = None


def _keyed(scan_: RankScan) -> dict[tuple[bool, int, str, int], Collective]:
    """The rank's collectives by (on the GPU, step, name, k-th of that name within the step):
    n log n in the rank's steps and collectives (each step found by bisection)."""
    gpu_steps = scan_.steps_gpu if _gpu_steps_are_spans(scan_) else scan_.steps_cpu
    step_of = {True: _step_finder(gpu_steps), False: _step_finder(scan_.steps_cpu)}
    keyed: dict[tuple[bool, int, str, int], Collective] = {}
    counts: dict[tuple[bool, int, str], int] = {}
    for c in sorted(scan_.collectives, key=lambda c: c.start):
        step = step_of[c.on_gpu](c.start)
        base = (c.on_gpu, step, c.name)
        k = counts.get(base, 0)
        counts[base] = k + 1
        keyed[base + (k,)] = c
    return keyed


def _step_finder(steps: dict[int, tuple[int, int]]) -> Callable[[int], int]:
    """t -> the step whose range holds t, a step lasting until the next one starts; -1 before the
    first (steps sorted by start once; each lookup a bisection; of steps starting together, the last
    in that order, as a scan in start order finds it)."""
    import bisect
    ordered = sorted(steps.items(), key=lambda item: item[1][0])
    starts = [start for _, (start, _) in ordered]
    numbers = [number for number, _ in ordered]

    def step_of(t: int) -> int:
        at = bisect.bisect_right(starts, t)
        return numbers[at - 1] if at else -1
    return step_of


def _host_times(scans: Sequence[RankScan]) -> dict[str, dict[tuple[bool, int, str, int], tuple[int, int, int, int]]]:
    """Per host, per collective: (median end, earliest end, latest start, earliest start) over its ranks."""
    per_host: dict[str, dict[tuple[bool, int, str, int], list[Collective]]] = {}
    for s in scans:
        for key, c in _keyed(s).items():
            per_host.setdefault(s.rank.host, {}).setdefault(key, []).append(c)
    return {host: {key: (int(statistics.median(c.end for c in cs)), min(c.end for c in cs), max(c.start for c in cs),
                         min(c.start for c in cs)) for key, cs in keys.items()} for host, keys in per_host.items()}


def estimate_offsets(scans: Sequence[RankScan]) -> dict[str, HostOffset]:
    """Each host's offset to the first rank's host (see the module's docstring)."""
    hosts = list(dict.fromkeys(s.rank.host for s in scans))
    if not hosts:
        return {}
    reference = hosts[0]
    times = _host_times(scans)
    bases = {s.rank.host: s.base_ns for s in scans if s.base_ns is not None}
    offsets = {reference: HostOffset(reference, 0, "reference")}
    ref = times.get(reference, {})
    for host in hosts[1:]:
        mine = times.get(host, {})
        common = [k for k in mine if k in ref]
        gpu = [k for k in common if k[0]]
        common = gpu or common  # NCCL/RCCL kernels' ends are sharper than the CPU ops around them
        if common:
            estimates = [ref[k][0] - mine[k][0] for k in common]
            middle = int(statistics.median(estimates))
            spread = int(statistics.median(abs(e - middle) for e in estimates))
            low = max(ref[k][2] - mine[k][1] for k in common)  # reference's last arrival before our first exit
            high = min(ref[k][1] - mine[k][2] for k in common)  # our last arrival before reference's first exit
            offset = min(max(middle, low), high) if low <= high else middle
            what = "NCCL/RCCL kernels" if gpu else "CPU-side collectives (gloo/nccl/c10d)"
            note = "" if low <= high else "; the causal bounds disagree (clock drift, or unmatched calls)"
            offsets[host] = HostOffset(host, offset, f"median of {len(common)} {what}' ends against {reference}'s, "
                                       f"within the causal bounds{note}", len(common), spread,
                                       low if low <= high else None, high if low <= high else None)
        elif host in bases and reference in bases:
            offsets[host] = HostOffset(host, bases[host] - bases[reference],
                                       f"no collective in common with {reference}: kineto's wall-clock bases "
                                       "(baseTimeNanoseconds; NTP accuracy)")
        else:
            offsets[host] = HostOffset(host, 0, f"no collective in common with {reference} and no wall-clock base: "
                                       "not shifted")
    return offsets


def _gpu_steps_are_spans(scan_: RankScan) -> bool:
    """The GPU side's step ranges are the step (analysis/steps.py's rule: real spans, and more of them)."""
    from profilectl.analysis.steps import GPU_SIDE, steps_of
    return bool(scan_.steps_gpu) and steps_of(_markers(scan_)).source.startswith(GPU_SIDE.split(" (")[0])


def _markers(scan_: RankScan) -> list[Any]:
    from profilectl.model.timeline import Marker
    return [Marker(f"ProfilerStep#{n}", a, b, False) for n, (a, b) in scan_.steps_cpu.items()] + \
        [Marker(f"ProfilerStep#{n}", a, b, True) for n, (a, b) in scan_.steps_gpu.items()]


@dataclass(frozen=True)
class Straggler:
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
    steps = steps_of(_markers(scan_))
    if not steps:  # no step marks: each collective call is a unit, as the report judges it
        return RankWaits(rank=str(scan_.rank.rank), host=scan_.rank.host, basis=basis,
                         steps=collective_units((blocks.start, blocks.end)), unit="collective")
    return RankWaits(rank=str(scan_.rank.rank), host=scan_.rank.host, basis=basis,
                     steps=tuple((w.step, w.start, w.end, blocks.within(w.start, w.end) if chosen else 0)
                                 for w in steps.steady))


def find_straggler(scans: Sequence[RankScan]) -> Straggler | None:
    """The straggler by the report's one rule, from every rank's steps (not only the window's)."""
    from profilectl.analysis.stragglers import judge
    found = judge([_waits(s) for s in scans])
    if found is None or found.straggler is None:
        return None
    s = found.straggler
    host = next(scan.rank.host for scan in scans if str(scan.rank.rank) == s.rank)
    return Straggler(int(s.rank), host, int(s.lead_ns), s.steps_led, s.steps,
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
class RankWritten:
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
    straggler: Straggler | None
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
    for _ in range(RETRIES + 1):
        cut = plan_cut(histogram, fixed, budget)
        result = _write(scans, output, offsets, origin, cut, steps, left, straggler, clock_host, cap, histogram,
                        workers)
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
                size += f.stat().st_size * (10 if chrome_io.is_gzip(f) else 1)  # torch traces inflate ~10x
            except OSError:
                pass
    return min(len(ranks), chrome_parallel.workers_for(size))


T = TypeVar("T")
J = TypeVar("J")


def _in_order(work: Callable[[J], T], jobs: Sequence[J], workers: int) -> Iterator[T]:
    """work(job) for every job, in order; in `workers` processes with a few jobs in flight, so that
    results wait for the writer in bounded number."""
    if workers <= 1 or len(jobs) < 2:
        yield from map(work, jobs)
        return
    from collections import deque
    with chrome_parallel.pool(workers) as executor:
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


def _write(scans: Sequence[RankScan], output: Path, offsets: dict[str, HostOffset], origin: int | None, cut: Cut,
           steps: tuple[int, int] | None, left: list[LeftOut], straggler: Straggler | None, clock_host: str,
           cap: int, histogram: Any, workers: int) -> MergedTrace:
    """The merged trace as `output`, whole or not at all (files.write_into: a temporary with an
    unpredictable name in the output's folder, renamed over it once complete; removed on a failure)."""
    from profilectl.files import write_into
    done: list[tuple[MergedTrace, int, int]] = []

    def write(fh: Any) -> None:
        result, json_bytes = _write_to(fh, output.name.endswith(".gz"), scans, output, offsets, origin, cut, steps,
                                       left, straggler, clock_host, cap, histogram, workers)
        fh.flush()
        done.append((result, json_bytes, fh.tell()))
    try:
        write_into(output, write)
    except OSError as exc:
        raise OutputError(exc) from None
    result, json_bytes, file_bytes = done[0]
    return _with_sizes(result, json_bytes, file_bytes)


def _write_to(target: Any, gz: bool, scans: Sequence[RankScan], output: Path, offsets: dict[str, HostOffset],
              origin: int | None, cut: Cut, steps: tuple[int, int] | None, left: list[LeftOut],
              straggler: Straggler | None, clock_host: str, cap: int, histogram: Any,
              workers: int) -> tuple[MergedTrace, int]:
    """The trace's bytes into the open binary file `target` (gzip'd when `gz`; the file stays open)."""
    import contextlib
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
        for s, (blob, kept) in zip(scans, _in_order(_rank_bytes, jobs, workers)):
            out.write((b",\n" if out.written > len(HEAD) else b"") + blob)
            written.append(RankWritten(s.rank.rank, s.rank.host, s.window_steps, offsets[s.rank.host].offset_ns,
                                       s.in_window, kept))
            total_in += s.in_window
            total_out += kept
        dropped = {TIER_NAMES[t]: int(sum(histogram[t, b, 1] for b in range(BINS) if cut.drops(t, b)))
                   for t in (FLOW, CPU, GPU)}
        dropped = {k: v for k, v in dropped.items() if v}
        body_bytes = out.written
        result = MergedTrace(output=str(output), ranks=tuple(written), left_out=tuple(left), steps=steps,
                             offsets=tuple(offsets.values()), clock=f"{clock_host} (the straggler's host)" if straggler
                             else f"{clock_host} (the first rank's host)", straggler=straggler,
                             events_in_window=total_in, events_written=total_out, dropped=dropped,
                             cut=cut.describe(), bytes_written=0, file_bytes=0, cap_bytes=cap)
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
    for file, events, _ in rank_batches(s.rank):
        for event in events:
            if event.ph == "M" or event.ts is None:
                continue
            name = event.name if isinstance(event.name, str) else str(event.name)
            t0 = _ns(file, event, event.ts, "ts")
            dur = max(0, _ns(file, event, event.dur, "dur")) if event.ph == "X" and event.dur is not None else 0
            if t0 + dur < low or t0 > high:
                continue
            tier = _tier(event, name)
            if tier != KEPT and cut.drops_event(tier, dur):
                continue
            step = STEP.match(name) if tier == KEPT else None
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
