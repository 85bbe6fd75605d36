"""Time on the timeline: is the GPU idle and when, do streams overlap, is communication hidden under
compute, is the job launch-bound, which step was slow. Over the GPU events of any trace with
timestamps (torch Chrome traces, rocprofv3 CSV/JSON traces, rocpd databases), per rank and merged.

Definitions, chosen to match Holistic Trace Analysis (HTA) where it has the same number:
- span: from the first GPU activity's start to the last one's end, per rank (HTA: the trace's
  kernel time span); busy: the union of every kernel, copy and memset on every stream of the rank
  (HTA's temporal breakdown counts the same three kinds); idle = span - busy.
- idle gaps: the holes in that union. Gaps shorter than GAP_MIN_NS are counted in idle time but not
  as gaps (they are the launch granularity of back-to-back kernels, not a GPU waiting on the host).
- concurrency: time with two or more GPU activities running at once (on different streams).
- communication: NCCL/RCCL kernels; compute: every other kernel (copies and memsets are neither);
  hidden communication: the part of the communication time during which compute also runs, as a
  share of communication time (HTA's comm/comp overlap).
- launch-bound indicators: GPU time in kernels that ran shorter than their own launch call on the
  CPU (HTA's "short kernels"; where no launch is linked, shorter than SHORT_KERNEL_NS); launch call
  time against kernel time; the launch delay (the launch call's end to the kernel's start, HTA's);
  the mean launch queue depth (kernels launched and not yet finished, all streams: not HTA's queue
  length, which counts all GPU work per stream until it starts).
- HTA by default drops kernels launched after the last ProfilerStep began
  (include_last_profiler_step=False): every kernel of the trace counts here.
- steps: analysis/steps.py (the host side's step ranges); a step's GPU busy time is the busy union
  clipped to its window, its top kernel the one with most GPU time among those launched inside it.
Every definition, with its one place in the code: docs/definitions.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from profilectl.analysis.collectives import collective_names, is_collective  # noqa: F401 (is_collective: re-exported)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from profilectl.analysis.idle import HtaStream, HtaStreamIdle
    Ints = Sequence[int] | NDArray[Any]  # a column: a list, or a numpy array kept as it is

GAP_MIN_NS = 10_000  # 10 µs
SHORT_KERNEL_NS = 5_000  # a typical launch call's cost, where a kernel's own launch is not in the trace
TOP_GAPS = 5
MAX_CURVE_POINTS = 300  # busy-over-time samples per rank, for the report's timeline chart
KERNEL, COPY = 0, 1


@dataclass(frozen=True)
class Marker:
    name: str
    start: int
    end: int
    on_gpu: bool


# Host activity categories (HostActivity.category)
HOST_OPERATOR, HOST_ANNOTATION, HOST_RUNTIME, HOST_PYTHON = 0, 1, 2, 3
HOST_CATEGORY_NAMES = ("CPU operator", "annotation", "runtime/driver call", "Python function")


@dataclass(frozen=True)
class HostActivity:
    """What the host did, per thread, on the rank's clock (ns): CPU operators, user annotations
    (ProfilerStep#N, DataLoader, Optimizer.step, compile phases), runtime/driver calls. Columnar
    numpy arrays, read by the idle-time diagnosis (analysis/idle.py)."""
    start: "NDArray[np.int64]"
    end: "NDArray[np.int64]"
    category: "NDArray[np.int8]"  # HOST_OPERATOR, HOST_ANNOTATION, HOST_RUNTIME, HOST_PYTHON
    name: "NDArray[np.int64]"  # index into names
    thread: "NDArray[np.int64]"  # index into threads
    names: tuple[str, ...]
    threads: tuple[str, ...]

    @staticmethod
    def joined(parts: Sequence["HostActivity"]) -> "HostActivity | None":
        import numpy as np
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        names: dict[str, int] = {}
        threads: dict[str, int] = {}
        name_parts, thread_parts = [], []
        for part in parts:
            name_map = np.array([names.setdefault(v, len(names)) for v in part.names] or [0], dtype=np.int64)
            thread_map = np.array([threads.setdefault(v, len(threads)) for v in part.threads] or [0], dtype=np.int64)
            name_parts.append(name_map[part.name])
            thread_parts.append(thread_map[part.thread])
        return HostActivity(start=np.concatenate([p.start for p in parts]), end=np.concatenate([p.end for p in parts]),
                            category=np.concatenate([p.category for p in parts]), name=np.concatenate(name_parts),
                            thread=np.concatenate(thread_parts), names=tuple(names), threads=tuple(threads))


@dataclass(frozen=True)
class RankTimeline:
    """One process's GPU activity and launch calls, in ns of one clock (numpy int64 arrays)."""
    rank: str
    host: str | None
    start: "NDArray[np.int64]"
    end: "NDArray[np.int64]"
    stream: "NDArray[np.int64]"  # index into streams
    kind: "NDArray[np.int8]"  # KERNEL or COPY (copies and memsets)
    name: "NDArray[np.int64]"  # index into names
    correlation: "NDArray[np.int64]"  # -1 where unknown
    names: tuple[str, ...]
    streams: tuple[str, ...]
    api_start: "NDArray[np.int64]"
    api_end: "NDArray[np.int64]"
    api_correlation: "NDArray[np.int64]"
    markers: tuple[Marker, ...] = ()
    host_activity: HostActivity | None = None  # torch traces: what the host did (optional)
    streamed: "StreamedFigures | None" = None  # made while the reader parsed the trace (StartOrderFeed)
    # What the trace says the program is: "torch" (torch.profiler), "xla" (jax/TensorFlow), "python"
    # or "native" (a process Nsight Systems names); "" unknown. Picks the wording of host-gap advice.
    program: str = ""

    @property
    def empty(self) -> bool:
        return len(self.start) == 0

    @cached_property
    def start_order(self) -> "NDArray[Any] | None":
        """The activities' stable sort order by start (None where already in start order), made once
        per timeline for every analysis that walks it (timeline, idle, HTA breakdown), and held as
        int32 where the rows fit: half of argsort's int64, and no second or third sort."""
        return start_order(self.start)

    def release_order(self) -> None:
        """Lets the cached start order go once the analyses that walk the whole trace have run."""
        self.__dict__.pop("start_order", None)


@dataclass(frozen=True)
class StreamedFigures:
    """What walking a rank's activities in start order gives (analyse_rank's row, gaps and busy
    blocks, HTA's idle breakdown), made while the reader parsed the trace."""
    timeline: tuple["TimelineRow", list["Gap"], tuple["NDArray[np.int64]", "NDArray[np.int64]"]]
    hta: tuple["HtaStreamIdle", ...]


def rank_timeline(rank: str, host: str | None, *, start: Ints, end: Ints, stream: Ints,
                  kind: Ints | bytes, name: Ints, correlation: Ints | None = None,
                  names: Sequence[str], streams: Sequence[str], api_start: Ints = (),
                  api_end: Ints = (), api_correlation: Ints = (),
                  markers: Iterable[Marker] = (), host_activity: HostActivity | None = None,
                  streamed: StreamedFigures | None = None, program: str = "") -> RankTimeline:
    """Columns given as numpy arrays are kept as they are (no copy; index columns may be any integer
    type, int32 halves their memory); sequences are converted once."""
    import numpy as np
    count = len(start)
    return RankTimeline(
        rank=rank, host=host, start=np.asarray(start, dtype=np.int64), end=np.asarray(end, dtype=np.int64),
        stream=_indices(stream),
        kind=np.frombuffer(bytes(kind), dtype=np.int8) if isinstance(kind, (bytes, bytearray)) else
        np.asarray(kind, dtype=np.int8),
        name=_indices(name),
        # no correlation ids: one shared -1, not a column
        correlation=_indices(correlation) if correlation is not None else
        np.broadcast_to(np.int64(-1), (count,)),
        names=tuple(names), streams=tuple(streams), api_start=np.asarray(api_start, dtype=np.int64),
        api_end=np.asarray(api_end, dtype=np.int64), api_correlation=np.asarray(api_correlation, dtype=np.int64),
        markers=tuple(markers), host_activity=host_activity, streamed=streamed, program=program)


def small_distinct(ids: "NDArray[Any]") -> list[int]:
    """The distinct values of an id column (stream ids: a few small numbers), ascending: one value
    where the column is a broadcast, a bincount where the ids are small (np.unique hashes every
    row: 1.2 s of an 8 M-row rocpd timeline)."""
    import numpy as np
    if not len(ids):
        return []
    if ids.strides == (0,):
        return [int(ids[0])]
    low, high = int(ids.min()), int(ids.max())
    if low >= 0 and high < 1 << 16:  # ids of a small table, whatever their type
        return np.flatnonzero(np.bincount(ids, minlength=high + 1)).tolist()
    return np.unique(ids).tolist()


def start_order(start: "NDArray[np.int64]") -> "NDArray[Any] | None":
    """A stable sort's order of `start` (int32 where the rows fit), None where already sorted."""
    import numpy as np
    if bool((start[1:] >= start[:-1]).all()):
        return None
    order = np.argsort(start, kind="stable")
    if len(order) < 1 << 31:
        order = order.astype(np.int32)
    return order


def _indices(values: Ints) -> "NDArray[np.int64]":
    import numpy as np
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return values
    return np.asarray(values, dtype=np.int64)


def combine(parts: Sequence[RankTimeline]) -> list[RankTimeline]:
    """Files of the same rank (rocprofv3 writes kernels, copies and API calls to separate files)
    joined into one timeline per (rank, host)."""
    import numpy as np
    by_key: dict[tuple[str, str | None], list[RankTimeline]] = {}
    for part in parts:
        by_key.setdefault((part.rank, part.host), []).append(part)
    joined = []
    for (rank, host), group in by_key.items():
        if len(group) == 1:
            joined.append(group[0])
            continue
        names: dict[str, int] = {}
        streams: dict[str, int] = {}
        name_parts, stream_parts = [], []
        for part in group:
            name_map = np.array([names.setdefault(v, len(names)) for v in part.names] or [0], dtype=np.int64)
            stream_map = np.array([streams.setdefault(v, len(streams)) for v in part.streams] or [0], dtype=np.int64)
            name_parts.append(name_map[part.name])
            stream_parts.append(stream_map[part.stream])
        joined.append(RankTimeline(
            rank=rank, host=host, start=np.concatenate([p.start for p in group]),
            end=np.concatenate([p.end for p in group]), stream=np.concatenate(stream_parts),
            kind=np.concatenate([p.kind for p in group]), name=np.concatenate(name_parts),
            correlation=np.concatenate([p.correlation for p in group]), names=tuple(names), streams=tuple(streams),
            api_start=np.concatenate([p.api_start for p in group]), api_end=np.concatenate([p.api_end for p in group]),
            api_correlation=np.concatenate([p.api_correlation for p in group]),
            markers=tuple(m for p in group for m in p.markers),
            host_activity=HostActivity.joined([p.host_activity for p in group if p.host_activity is not None]),
            program=next((p.program for p in group if p.program), "")))
    return joined


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class Gap:
    start_ns: int  # from the rank's first GPU activity
    duration_ns: int
    after: str  # the activity that ended before the gap
    before: str  # the activity that started after it
    rank: str = ""


@dataclass(frozen=True)
class LaunchStats:
    """How kernels relate to their launch calls on the CPU."""
    short_kernel_percent: float  # of kernel time, in kernels shorter than their launch
    short_kernels: int
    short_kernel_basis: str  # "launch call" (each kernel against its own launch) or "5 µs"
    launch_call_ns: int  # CPU time in the launch calls of the trace's kernels
    launch_delay_mean_ns: float | None  # launch call's end to kernel start (HTA's launch delay)
    queue_depth_mean: float | None
    queue_depth_max: int | None


@dataclass(frozen=True)
class TimelineRow:
    """One rank (or, as `merged`, all of them together: span, busy, idle and gaps as unions over the
    ranks on one clock; GPU-time totals added)."""
    rank: str
    host: str | None
    span_ns: int
    busy_ns: int
    idle_ns: int
    busy_percent: float
    gaps: int  # idle gaps of at least GAP_MIN_NS
    gap_total_ns: int
    largest_gap_ns: int
    concurrent_ns: int  # two or more GPU activities at once
    max_concurrency: int
    streams: int
    compute_ns: int
    communication_ns: int
    hidden_communication_ns: int
    hidden_communication_percent: float | None  # None: no communication kernels
    memory_ns: int  # copies and memsets
    launch: LaunchStats
    launch_bound: bool
    verdict: str  # one line: what the numbers say


@dataclass(frozen=True)
class StepRow:
    step: int
    name: str
    wall_ns: int  # the step's range
    gpu_busy_ns: int
    busy_percent: float
    top_kernel: str | None
    top_kernel_ns: int
    communication_percent: float  # of the step's busy time
    warmup: bool
    rank: str = ""  # merged steps: the slowest rank's
    # the trace's last step: a profiler stopped at the program's end closes it there, so it may hold
    # the teardown (HTA leaves it out by default for this reason); shown, but not median nor slowest
    last: bool = False

    @property
    def steady(self) -> bool:
        return not self.warmup and not self.last


@dataclass(frozen=True)
class BusyCurve:
    """GPU busy share over time, downsampled: `busy[i]` is the busy fraction of bucket i."""
    rank: str
    start_ns: int
    bucket_ns: int
    busy: tuple[float, ...]


@dataclass(frozen=True)
class RanksBusy:
    """A job's GPU busy share as its ranks have it: each rank's busy time over its own GPU span, their
    mean and range (the job-level figure; docs/definitions.md). The union `merged` is another figure:
    the share of the job's span in which any GPU was busy."""
    ranks: int
    mean_percent: float
    min_percent: float
    max_percent: float


@dataclass(frozen=True)
class TimelineAnalysis:
    merged: TimelineRow  # one rank's row; for a job, the union over its ranks ("any GPU busy")
    ranks: tuple[TimelineRow, ...] = ()  # per rank when there are several
    ranks_busy: RanksBusy | None = None  # a job's per-rank mean and range
    gaps: tuple[Gap, ...] = ()  # the largest idle gaps, all ranks
    steps: tuple[StepRow, ...] = ()  # per step (merged over ranks: the slowest rank's row)
    slowest_steps: tuple[int, ...] = ()  # step numbers, slowest first, warm-up left out
    step_source: str = ""  # "GPU-side ProfilerStep ranges" / "CPU-side ProfilerStep ranges"
    curves: tuple[BusyCurve, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- interval arithmetic
def _union(start: "NDArray[np.int64]", end: "NDArray[np.int64]", presorted: bool = False
           ) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """Disjoint, sorted intervals covering the same time (`presorted`: already in start order)."""
    import numpy as np
    if len(start) == 0:
        return start, end
    if presorted:
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    first, last, reach = _blocks(s, e)
    return s[first], reach[last]


def _blocks(s: "NDArray[np.int64]", e: "NDArray[np.int64]"
            ) -> tuple["NDArray[np.intp]", "NDArray[np.intp]", "NDArray[np.int64]"]:
    """Of intervals in start order: each block's first and last interval, and the running end."""
    import numpy as np
    reach = np.maximum.accumulate(e)
    # a new block starts where an interval begins after everything before it has ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return first, last, reach


def _concurrency(s: "NDArray[np.int64]", e: "NDArray[np.int64]") -> tuple[int, int]:
    """(time with two or more intervals open, the most open at once) of intervals in start order,
    without sorting starts and ends together: interval i overlaps what came before it from its start
    to min(its end, the furthest end before it), and the union of those pieces is exactly the time
    when two or more are open. The deepest moment is just after some start: the starts up to it less
    the ends up to it (an end and a start at the same time do not overlap)."""
    import numpy as np
    if not len(s):
        return 0, 0
    top = np.maximum.accumulate(e)[:-1]  # the furthest end before each interval (from the second)
    np.minimum(e[1:], top, out=top)
    keep = s[1:] < top
    top = top[keep]
    concurrent = _length(*_union(s[1:][keep], top, presorted=True))
    del top, keep
    ends = np.sort(e)
    deepest = 0
    # starts up to interval i: i + 1, exact for the last of equal starts, where the maximum is
    for at in range(0, len(s), 1 << 20):  # in blocks: an index array of the whole trace would double its memory
        part = s[at:at + (1 << 20)]
        depth = np.arange(at + 1, at + len(part) + 1) - np.searchsorted(ends, part, side="right")
        deepest = max(deepest, int(depth.max()))
    return concurrent, deepest


def _length(start: "NDArray[np.int64]", end: "NDArray[np.int64]") -> int:
    return int((end - start).sum()) if len(start) else 0


def _intersection_length(a: tuple["NDArray[np.int64]", "NDArray[np.int64]"],
                         b: tuple["NDArray[np.int64]", "NDArray[np.int64]"]) -> int:
    """Total overlap of two disjoint sorted interval sets (a sweep over both)."""
    import numpy as np
    if not len(a[0]) or not len(b[0]):
        return 0
    # +1 at each start, -1 at each end, per set; time where both counts are 1
    points = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(len(a[0]), np.int64), -np.ones(len(a[1]), np.int64),
                         np.zeros(len(b[0]) * 2, np.int64)])
    db = np.concatenate([np.zeros(len(a[0]) * 2, np.int64), np.ones(len(b[0]), np.int64),
                         -np.ones(len(b[1]), np.int64)])
    order = np.argsort(points, kind="stable")
    points, da, db = points[order], np.cumsum(da[order]), np.cumsum(db[order])
    both = (da[:-1] > 0) & (db[:-1] > 0)
    return int((np.diff(points) * both).sum())


def _depth(start: "NDArray[np.int64]", end: "NDArray[np.int64]") -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """(times, how many intervals are open from each time to the next)."""
    import numpy as np
    points = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((delta, points))  # at equal times, ends (-1) before starts: touching is not overlapping
    return points[order], np.cumsum(delta[order])


class _Blocks:
    """Disjoint sorted intervals with their running length: the length inside any window in
    O(log n) (a trace of thousands of steps over millions of kernels stays linear)."""

    def __init__(self, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"]):
        import numpy as np
        self.start, self.end = blocks
        self.done = np.concatenate([[0], np.cumsum(self.end - self.start)])

    def within(self, low: int, high: int) -> int:
        import numpy as np
        first = int(np.searchsorted(self.end, low, side="right"))  # the first block ending after low
        stop = int(np.searchsorted(self.start, high, side="left"))  # blocks starting before high
        if stop <= first:
            return 0
        total = int(self.done[stop] - self.done[first])
        total -= max(0, low - int(self.start[first]))  # the part of the first block before the window
        total -= max(0, int(self.end[stop - 1]) - high)  # the part of the last one after it
        return total


def _collective(t: RankTimeline) -> "NDArray[np.bool_]":
    """Which events are NCCL/RCCL kernels' (names matched once each, then indexed)."""
    import numpy as np
    if not len(t.name):
        return np.zeros(0, dtype=bool)
    return collective_names(t.names)[t.name]


# ---------------------------------------------------------------- one rank, chunk by chunk
CHUNK_ROWS = 1 << 18  # intervals per chunk of the analysis: its temporaries stay tens of MB at any length


class _BlockStore:
    """Closed blocks (starts, ends) as they come: written into arrays sized once where the most there
    can be is known (`capacity`: pages never written are never committed, and no concatenation
    holds them twice), else kept as parts joined at the end."""

    def __init__(self, capacity: int | None = None) -> None:
        import numpy as np
        self.count = 0
        self.buffers = (np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64)) \
            if capacity is not None else None
        self.parts: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] = []

    def append(self, starts: "NDArray[np.int64]", ends: "NDArray[np.int64]") -> None:
        import numpy as np
        if not len(starts):
            return
        if self.buffers is not None and self.count + len(starts) > len(self.buffers[0]):
            self.parts, self.buffers = [self.arrays()], None  # more than the capacity said: parts from here
        if self.buffers is not None:
            self.buffers[0][self.count:self.count + len(starts)] = starts
            self.buffers[1][self.count:self.count + len(ends)] = ends
        else:
            self.parts.append((np.asarray(starts), np.asarray(ends)))
        self.count += len(starts)

    def arrays(self, tail: tuple[int, int] | None = None) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
        """Every block, and `tail` (the open one) after them."""
        import numpy as np
        if tail is not None:
            self.append(np.array([tail[0]], dtype=np.int64), np.array([tail[1]], dtype=np.int64))
        if self.buffers is not None:
            out = self.buffers[0][:self.count], self.buffers[1][:self.count]
        elif len(self.parts) == 1:
            out = self.parts[0]
        else:
            out = (np.concatenate([p[0] for p in self.parts]) if self.parts else np.zeros(0, np.int64),
                   np.concatenate([p[1] for p in self.parts]) if self.parts else np.zeros(0, np.int64))
            self.parts = [out]
        if tail is not None:
            self.count -= 1
            if self.buffers is None:
                self.parts = [(out[0][:-1], out[1][:-1])]
        return out


class _UnionStream:
    """The union of intervals that arrive in start order, chunk by chunk: the block still open at the
    end of a chunk is carried (its start and reach) and enters the next chunk as one interval before
    it, so the blocks are exactly those of the whole. Closed blocks are kept (`keep`) or only added up."""

    def __init__(self, keep: bool, capacity: int | None = None) -> None:
        self.open: tuple[int, int] | None = None  # (start, reach) of the block still open
        self.closed_ns = 0
        self.store = _BlockStore(capacity) if keep else None
        self.first: int | None = None  # the first block's start
        self.gaps = self.gap_total = self.largest_hole = 0  # holes of GAP_MIN_NS or more; the largest hole

    def add(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]") -> None:
        import numpy as np
        if not len(s):
            return
        if self.open is not None:
            s = np.concatenate([[self.open[0]], s])
            e = np.concatenate([[self.open[1]], e])
        starts, ends = _union(s, e, presorted=True)
        self.closed(starts, ends)

    def closed(self, starts: "NDArray[np.int64]", ends: "NDArray[np.int64]") -> None:
        """This chunk's blocks: all but the last are closed, the last stays open."""
        if self.first is None:
            self.first = int(starts[0])
        holes = starts[1:] - ends[:-1]  # between this chunk's blocks, the carried one first
        if len(holes):
            counted = holes >= GAP_MIN_NS
            self.gaps += int(counted.sum())
            self.gap_total += int(holes.sum(where=counted))
            self.largest_hole = max(self.largest_hole, int(holes.max()))
        self.open = int(starts[-1]), int(ends[-1])
        self.closed_ns += _length(starts[:-1], ends[:-1])
        if self.store is not None:
            self.store.append(starts[:-1], ends[:-1])

    @property
    def length(self) -> int:
        return self.closed_ns + (self.open[1] - self.open[0] if self.open is not None else 0)

    def blocks(self) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
        import numpy as np
        if self.store is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self.store.arrays(self.open)


def _largest(values: "NDArray[np.int64]", count: int) -> "NDArray[np.intp]":
    """Indices of the `count` largest values, largest first, ties in index order: what a stable sort
    by descending value gives, without sorting them all."""
    import numpy as np
    if len(values) > 4 * count:
        floor = np.partition(values, len(values) - count)[len(values) - count]
        chosen = np.flatnonzero(values >= floor)  # ties at the floor included, in index order
        return chosen[np.argsort(-values[chosen], kind="stable")][:count]
    return np.argsort(-values, kind="stable")[:count]


def busy_union(t: RankTimeline, chunk_rows: int = CHUNK_ROWS) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """The union of a rank's GPU activity (as _union(t.start, t.end)), chunk by chunk in start order:
    no sorted copy of the columns, the blocks written into arrays sized once."""
    return _union_in_chunks(t.start, t.end, chunk_rows, t.start_order)


def _union_in_chunks(start: "NDArray[np.int64]", end: "NDArray[np.int64]", chunk_rows: int = CHUNK_ROWS,
                     order: "NDArray[Any] | None | bool" = True) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """_union(start, end) chunk by chunk through a stable sort's order (none where already in order);
    `order`: that order where the caller has it (None: in order), True to make it here."""
    count = len(start)
    if order is True or order is False:
        order = start_order(start)
    union = _UnionStream(keep=True, capacity=count)
    for at in range(0, count, chunk_rows):
        part: Any = slice(at, at + chunk_rows) if order is None else order[at:at + chunk_rows]
        union.add(start[part], end[part])
    return union.blocks()


class RankStream:
    """One rank's timeline figures (TimelineRow, the largest gaps with the activities around them, the
    busy blocks) from its GPU activity given in start order, chunk by chunk, with a small carried state:
    the open block of each union, the furthest end so far, the intervals still open, the top gaps. The
    numbers are those of the whole trace at once (tests/unit/test_timeline_columns.py checks it with
    chunk boundaries inside overlapping intervals).

    `index` (optional, per chunk): each activity's position in the trace as written, where the caller
    sorted it; a gap's `after` is the last activity in that order ending where the gap begins. Chunks
    need end >= start for exactness of the deepest concurrency (analyse_rank checks and otherwise gives
    the trace as one chunk). The trailing run of equal starts of a chunk is held back for the next one,
    so no chunk boundary splits activities that start together."""

    def __init__(self, names: Sequence[str], api_start: "NDArray[np.int64] | None" = None,
                 api_end: "NDArray[np.int64] | None" = None,
                 api_correlation: "NDArray[np.int64] | None" = None, capacity: int | None = None) -> None:
        import numpy as np
        self.names = names
        self.collective = np.zeros(0, dtype=bool)
        self.rows = 0
        self.span_start: int | None = None
        self.span_end: int | None = None
        self.busy = _UnionStream(keep=True, capacity=capacity)  # capacity: the most blocks there can be
        self.pieces = _UnionStream(keep=False)  # where two or more run at once
        self.comm = _UnionStream(keep=True)
        self.compute = _UnionStream(keep=False)  # its blocks kept from the first collective on
        self.memory = _UnionStream(keep=False)
        self.reach: int | None = None  # the furthest end so far
        self.open_ends = np.zeros(0, dtype=np.int64)  # ends of intervals open past the last start seen
        self.ended = 0  # intervals whose end is at or before every start still to come
        self.rows_done = 0  # intervals analysed (the rest of `rows` is pending)
        self.deepest = 0
        self.streams: set[int] = set()
        self.gap_count = self.gap_total = self.largest_gap = 0
        self.holes = 0  # holes between busy blocks so far (the gaps' order, for ties)
        self.top: list[tuple[int, int, int, int, int]] = []  # (-length, order, gap start, after, before)
        self.best: tuple[int, int] = (-1, -1)  # the open block's activity ending at its reach: (index, name)
        self.pending: tuple[Any, ...] | None = None
        # launch statistics: against each kernel's own launch call where linked, else against 5 µs
        self.kernel_ns = self.short_ns = self.short_count = 0
        self.linked = self.linked_short_ns = self.linked_short_count = self.delay_ns = 0
        self.launch_ns = self.linked_kernel_ns = 0
        self.queue: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] = []
        self.api: tuple["NDArray[np.int64]", "NDArray[np.int64]", "NDArray[np.int64]"] | None = None
        if api_correlation is not None and len(api_correlation):
            order = np.argsort(api_correlation, kind="stable")
            self.api = (api_correlation[order], api_start[order], (api_end - api_start)[order])  # type: ignore[index, operator]

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            kind: "NDArray[np.int8]", name: "NDArray[Any]", correlation: "NDArray[np.int64] | None" = None,
            index: "NDArray[Any] | None" = None) -> None:
        import numpy as np
        if not len(start):
            return
        if index is None:
            index = np.arange(self.rows, self.rows + len(start), dtype=np.int64)
        if correlation is None:
            correlation = np.broadcast_to(np.int64(-1), (len(start),))
        columns: tuple[Any, ...] = (start, end, stream, kind, name, correlation, index)
        if self.pending is not None:
            columns = tuple(np.concatenate([a, b]) for a, b in zip(self.pending, columns))
            self.pending = None
        self.rows += len(start)
        cut = int(np.searchsorted(columns[0], columns[0][-1], side="left"))
        if cut == 0:  # one run of equal starts so far: wait for a different one
            self.pending = columns
            return
        self.pending = tuple(c[cut:] for c in columns) if cut < len(columns[0]) else None
        self._chunk(*(c[:cut] for c in columns))

    def _chunk(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]", stream: "NDArray[Any]",
               kind: "NDArray[np.int8]", name: "NDArray[Any]", correlation: "NDArray[np.int64]",
               index: "NDArray[Any]") -> None:
        import numpy as np
        first = self.span_start is None
        if first:
            self.span_start = int(s[0])
        top_end = int(e.max())
        self.span_end = top_end if self.span_end is None else max(self.span_end, top_end)
        self.streams.update(small_distinct(stream))
        self._gaps(s, e, name, index)
        # concurrency: each interval overlaps what came before it from its start to min(its end, the
        # furthest end before it); the union of those pieces is the time with two or more open
        reach = np.maximum.accumulate(e)
        before = np.empty(len(s), dtype=np.int64)
        before[0] = self.reach if self.reach is not None else np.iinfo(np.int64).min
        before[1:] = reach[:-1]
        if self.reach is not None:
            np.maximum(before, self.reach, out=before)
        self.reach = int(reach[-1]) if self.reach is None else max(self.reach, int(reach[-1]))
        np.minimum(e, before, out=before)
        keep = s < before
        if first:
            keep[0] = False
        self.pieces.add(s[keep], before[keep])
        # the deepest moment is just after some start: the starts up to it less the ends up to it,
        # exact at the last of a run of equal starts. Where two or more are open, the latest in
        # order of those open overlaps an earlier one (`keep`), and no fewer are open just after its
        # start: so the search is made only at the last row of the run of each such start (a chunk
        # never ends inside a run), and a start that overlaps nothing is 1 deep where it lasts.
        # Where an interval ends before it starts, at every start as before.
        ends = np.sort(np.concatenate([self.open_ends, e]))
        if bool((e >= s).all()):
            run_last = np.flatnonzero(np.append(s[1:] != s[:-1], True))
            at = run_last[np.searchsorted(run_last, np.flatnonzero(keep))]  # repeats are harmless to a max
            if bool((e > s).any()):
                self.deepest = max(self.deepest, 1)
        else:
            at = np.arange(len(s))
        del before, keep, reach
        if len(at):
            depth = (self.rows_done + 1 - self.ended) + at - np.searchsorted(ends, s[at], side="right")
            self.deepest = max(self.deepest, int(depth.max()))
            del depth
        closed = int(np.searchsorted(ends, s[-1], side="right"))
        self.ended += closed
        self.open_ends = ends[closed:]
        self.rows_done += len(s)
        del at, ends
        # compute, communication, copies
        if len(self.collective) < len(self.names):
            self.collective = collective_names(self.names)
        kernels = kind == KERNEL
        comm = kernels & self.collective[name] if len(name) else kernels
        compute = kernels & ~comm
        every_compute = bool(compute.all())
        if self.compute.store is None and bool(comm.any()):
            # compute blocks matter only where communication may overlap them: a block closed before
            # the first collective started ends before every collective (they come in start order)
            self.compute.store = _BlockStore()
        if every_compute:
            self.compute.add(s, e)
        else:
            self.compute.add(s[compute], e[compute])
            self.comm.add(s[comm], e[comm])
            self.memory.add(s[~kernels], e[~kernels])
        self._launches(s[kernels], e[kernels], correlation[kernels]) if not bool(kernels.all()) else \
            self._launches(s, e, correlation)

    def _gaps(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]", name: "NDArray[Any]",
              index: "NDArray[Any]") -> None:
        """The busy union's blocks of this chunk (the carried open block as its first interval), and
        the holes between them."""
        import numpy as np
        carried = self.busy.open
        if carried is not None:
            s = np.concatenate([[carried[0]], s])
            e = np.concatenate([[carried[1]], e])
            name = np.concatenate([[self.best[1]], name])
            index = np.concatenate([[self.best[0]], index])
        first, last, reach = _blocks(s, e)
        starts, ends = s[first], reach[last]
        self.busy.closed(starts, ends)

        def ending(block: int) -> tuple[int, int]:
            """(index, name) of the block's activity that ends at its reach, last in the trace's order."""
            a, b = int(first[block]), int(last[block]) + 1
            hit = a + np.flatnonzero(e[a:b] == ends[block])
            if not len(hit):  # the reach is an earlier block's (an activity here ends before it starts)
                hit = a + np.flatnonzero(e[a:b] == e[a:b].max())
            at = int(hit[int(np.argmax(index[hit]))])
            return int(index[at]), int(name[at])
        gap_len = starts[1:] - ends[:-1]
        if len(gap_len):
            counted = gap_len >= GAP_MIN_NS
            self.gap_count += int(counted.sum())
            self.gap_total += int(gap_len[counted].sum())
            self.largest_gap = max(self.largest_gap, int(gap_len.max()))
            if counted.any():
                for i in _largest(gap_len, TOP_GAPS).tolist():
                    if gap_len[i] < GAP_MIN_NS:
                        break
                    key = (-int(gap_len[i]), self.holes + i)
                    if len(self.top) == TOP_GAPS and key >= self.top[-1][:2]:
                        break
                    self.top.append((*key, int(ends[i]), ending(i)[1], int(name[first[i + 1]])))
                    self.top.sort()
                    del self.top[TOP_GAPS:]
            self.holes += len(gap_len)
        self.best = ending(len(starts) - 1)

    def _launches(self, k_start: "NDArray[np.int64]", k_end: "NDArray[np.int64]",
                  k_corr: "NDArray[np.int64]") -> None:
        import numpy as np
        duration = k_end - k_start
        self.kernel_ns += int(duration.sum())
        short = duration < SHORT_KERNEL_NS
        self.short_ns += int(duration[short].sum())
        self.short_count += int(short.sum())
        if self.api is None or not len(k_start) or not (k_corr >= 0).any():
            return
        api_corr, api_start, api_dur = self.api
        at = np.minimum(np.searchsorted(api_corr, k_corr), len(api_corr) - 1)
        linked = (k_corr >= 0) & (api_corr[at] == k_corr)
        if not linked.any():
            return
        launch_start, launch_dur = api_start[at[linked]], api_dur[at[linked]]
        own = duration[linked]
        short = own < launch_dur
        self.linked += int(linked.sum())
        self.linked_short_ns += int(own[short].sum())
        self.linked_short_count += int(short.sum())
        # HTA's launch delay: from the end of the launch call to the kernel's start, never negative
        self.delay_ns += int(np.clip(k_start[linked] - launch_start - launch_dur, 0, None).sum())
        self.launch_ns += int(launch_dur.sum())
        self.linked_kernel_ns += int(own.sum())
        self.queue.append((launch_start, k_end[linked]))

    def finish(self, rank: str, host: str | None
               ) -> tuple[TimelineRow, list[Gap], tuple["NDArray[np.int64]", "NDArray[np.int64]"]]:
        """The rank's row, its largest gaps, and its busy blocks (starts, ends)."""
        import numpy as np
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self._chunk(*pending)
        if self.span_start is None or self.span_end is None:
            raise ValueError("no GPU activity")
        span = self.span_end - self.span_start
        busy = self.busy.length
        names = self.names
        gaps = [Gap(start_ns=at - self.span_start, duration_ns=-negative, after=names[after], before=names[before],
                    rank=rank) for negative, _, at, after, before in self.top]
        if self.linked:
            queue = (np.concatenate([q[0] for q in self.queue]), np.concatenate([q[1] for q in self.queue]))
            depth_mean, depth_max = _queue_depth(*queue)
            del queue
            launch = LaunchStats(
                short_kernel_percent=100.0 * self.linked_short_ns / self.linked_kernel_ns if self.linked_kernel_ns
                else 0.0, short_kernels=self.linked_short_count, short_kernel_basis="launch call",
                launch_call_ns=self.launch_ns, launch_delay_mean_ns=self.delay_ns / self.linked,
                queue_depth_mean=depth_mean, queue_depth_max=depth_max)
        else:
            launch = LaunchStats(short_kernel_percent=100.0 * self.short_ns / self.kernel_ns if self.kernel_ns else 0.0,
                                 short_kernels=self.short_count, short_kernel_basis="5 µs", launch_call_ns=0,
                                 launch_delay_mean_ns=None, queue_depth_mean=None, queue_depth_max=None)
        comm_ns = self.comm.length
        hidden = _intersection_length(self.comm.blocks(), self.compute.blocks()) \
            if comm_ns and self.compute.store is not None else 0
        busy_percent = 100.0 * busy / span if span else 0.0
        row = TimelineRow(
            rank=rank, host=host, span_ns=span, busy_ns=busy, idle_ns=span - busy, busy_percent=busy_percent,
            gaps=self.gap_count, gap_total_ns=self.gap_total, largest_gap_ns=self.largest_gap,
            concurrent_ns=self.pieces.length, max_concurrency=self.deepest, streams=len(self.streams),
            compute_ns=self.compute.length, communication_ns=comm_ns, hidden_communication_ns=hidden,
            hidden_communication_percent=100.0 * hidden / comm_ns if comm_ns else None,
            memory_ns=self.memory.length, launch=launch,
            launch_bound=(verdict := _verdict(busy_percent, launch, busy))[0], verdict=verdict[1])
        return row, gaps, self.busy.blocks()


def analyse_rank(t: RankTimeline, chunk_rows: int = CHUNK_ROWS
                 ) -> tuple[TimelineRow, list[Gap], tuple["NDArray[np.int64]", "NDArray[np.int64]"]]:
    """The rank's row, its gaps, and its busy blocks (starts, ends) for the chart: the columns in
    start order, chunk by chunk (RankStream); a trace already in start order (most are) is read as it
    is, others through the order of a stable sort (no sorted copy of the columns)."""
    import numpy as np
    if t.streamed is not None and chunk_rows == CHUNK_ROWS:
        return t.streamed.timeline
    count = len(t.start)
    order = t.start_order
    if bool((t.end < t.start).any()):
        chunk_rows = max(count, 1)  # an activity ending before it starts: exact only as one chunk
    stream = RankStream(t.names, t.api_start, t.api_end, t.api_correlation, capacity=count)
    for at in range(0, count, chunk_rows):
        if order is None:
            part: "slice | NDArray[Any]" = slice(at, at + chunk_rows)
            index = None
        else:
            part = index = order[at:at + chunk_rows]
        stream.add(t.start[part], t.end[part], t.stream[part], t.kind[part], t.name[part], t.correlation[part],
                   index)
    return stream.finish(t.rank, t.host)


class StartOrderFeed:
    """A rank's activities as a reader parses them (file order, batch by batch) passed on in start
    order to a RankStream and an HtaStream while the parse goes on, so the timeline costs no walk of
    its own afterwards. Rows are held back until a later batch shows that nothing before them is
    still to come: a batch's smallest start is taken as the bound of every later row, which holds
    for traces written in start order or nearly (rocprofv3 writes completions: a few rows out of
    place). Where a later row breaks it, or an activity ends before it starts (exact only as one
    chunk), the feed gives up (`given_up`) and the analyses walk the columns afterwards as before.
    The order passed on is a stable sort's (by start, then position in the file): the same figures."""

    def __init__(self, rank_stream: RankStream, hta: "HtaStream", kind: int) -> None:
        self.rank_stream: RankStream | None = rank_stream
        self.hta: "HtaStream | None" = hta
        self.kind = kind
        self.rows = 0
        self.passed: int | None = None  # the largest start passed on so far
        self.pending: tuple[Any, ...] | None = None  # (start, end, stream, name, correlation, index), sorted

    @property
    def given_up(self) -> bool:
        return self.rank_stream is None

    def give_up(self) -> None:
        self.rank_stream = self.hta = None
        self.pending = None

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            name: "NDArray[Any]", correlation: "NDArray[Any]", names: Sequence[str]) -> None:
        """One batch in file order; `names`: the texts of every name id so far (collectives)."""
        import numpy as np
        if self.rank_stream is None or not len(start):
            return
        index = np.arange(self.rows, self.rows + len(start), dtype=np.int64)
        self.rows += len(start)
        low = int(start.min())
        if (self.passed is not None and low < self.passed) or bool((end < start).any()):
            self.give_up()
            return
        self.rank_stream.names = names
        batch: tuple[Any, ...] = (start, end, stream, name, correlation, index)
        held, self.pending = self.pending, None
        if held is not None:
            if int(held[0][-1]) < low:  # in order: the rows held back all go, no copies
                self._pass(held)
            else:
                batch = tuple(np.concatenate([a, b]) for a, b in zip(held, batch))
        if not bool((batch[0][1:] >= batch[0][:-1]).all()):
            order = np.argsort(batch[0], kind="stable")
            batch = tuple(column[order] for column in batch)
        cut = int(np.searchsorted(batch[0], low, side="left"))  # rows before the batch's smallest start
        if cut:
            self._pass(tuple(column[:cut] for column in batch))
        self.pending = tuple(column[cut:] for column in batch)

    def _pass(self, rows: tuple[Any, ...]) -> None:
        import numpy as np
        start, end, stream, name, correlation, index = rows
        assert self.rank_stream is not None and self.hta is not None
        self.rank_stream.add(start, end, stream, np.broadcast_to(np.int8(self.kind), (len(start),)), name,
                             correlation, index)
        self.hta.add(start, end, stream, correlation)
        self.passed = int(start[-1])

    def finish(self, rank: str, host: str | None, names: Sequence[str], streams: Sequence[str]
               ) -> StreamedFigures | None:
        """The figures, with every name and stream text; None where the feed gave up or saw nothing."""
        if self.rank_stream is None or self.hta is None or not self.rows:
            return None
        if self.pending is not None:
            self._pass(self.pending)
            self.pending = None
        self.rank_stream.names = names
        return StreamedFigures(timeline=self.rank_stream.finish(rank, host), hta=self.hta.result(streams))


def _launch_stats(t: RankTimeline, kernels: "NDArray[np.bool_]") -> LaunchStats:
    """Each kernel against its own launch call, where the trace links them by correlation id."""
    import numpy as np
    every = bool(kernels.all())  # no copies of the columns when every activity is a kernel
    k_start, k_end = (t.start, t.end) if every else (t.start[kernels], t.end[kernels])
    k_corr = t.correlation if every else t.correlation[kernels]
    kernel_time = int((k_end - k_start).sum())
    linked = np.zeros(len(k_start), dtype=bool)
    launch_start = launch_dur = np.zeros(0, dtype=np.int64)
    if len(t.api_correlation) and (k_corr >= 0).any():
        order = np.argsort(t.api_correlation, kind="stable")
        api_corr = t.api_correlation[order]
        at = np.searchsorted(api_corr, k_corr)
        at_clipped = np.minimum(at, len(api_corr) - 1)
        linked = (k_corr >= 0) & (api_corr[at_clipped] == k_corr)
        launch_start = t.api_start[order][at_clipped[linked]]
        launch_dur = (t.api_end - t.api_start)[order][at_clipped[linked]]
    duration = k_end - k_start
    if linked.any():
        short = duration[linked] < launch_dur
        short_time = int(duration[linked][short].sum())
        basis, short_count = "launch call", int(short.sum())
        # HTA's launch delay: from the end of the launch call to the kernel's start, never negative
        delay = float(np.clip(k_start[linked] - launch_start - launch_dur, 0, None).mean())
        depth_mean, depth_max = _queue_depth(launch_start, k_end[linked])
        launch_ns = int(launch_dur.sum())
        denominator = int(duration[linked].sum())
    else:
        short = duration < SHORT_KERNEL_NS
        short_time, short_count, basis = int(duration[short].sum()), int(short.sum()), "5 µs"
        delay, depth_mean, depth_max, launch_ns, denominator = None, None, None, 0, kernel_time
    return LaunchStats(short_kernel_percent=100.0 * short_time / denominator if denominator else 0.0,
                       short_kernels=short_count, short_kernel_basis=basis, launch_call_ns=launch_ns,
                       launch_delay_mean_ns=delay, queue_depth_mean=depth_mean, queue_depth_max=depth_max)


def _queue_depth(launched: "NDArray[np.int64]", finished: "NDArray[np.int64]") -> tuple[float | None, int | None]:
    """The launch queue depth: kernels whose launch call has begun and that have not finished yet,
    over all streams of the rank, averaged over the time from the first launch to the last end.
    Not HTA's queue length, which counts every GPU activity per stream until it starts
    (docs/definitions.md, "Launch queue depth")."""
    import numpy as np
    if not len(launched):
        return None, None
    times, depth = _depth(launched, np.maximum(finished, launched))
    width = np.diff(times)
    total = int(width.sum())
    return (float((width * depth[:-1]).sum() / total) if total else 0.0), int(depth.max())


def _verdict(busy_percent: float, launch: LaunchStats, busy_ns: int) -> tuple[bool, str]:
    """Launch-bound: the GPU idles much of the time while its kernels are, in time, mostly shorter
    than launching them, or the queue is nearly always empty."""
    if busy_ns <= 0:
        return False, "no GPU time to judge: the trace's GPU activity has no duration"
    short, depth = launch.short_kernel_percent, launch.queue_depth_mean
    starved = depth is not None and depth < 1.5
    bound = busy_percent < 70.0 and (short >= 30.0 or starved)
    if bound:
        why = f"{short:.0f} % of kernel time is in kernels shorter than their launch" if short >= 30.0 else \
            f"the launch queue holds {depth:.1f} kernels on average"
        text = (f"likely launch-bound: the GPU is busy {busy_percent:.0f} % of the time and {why}; fewer, larger "
                "kernels (fusion, CUDA/HIP graphs, torch.compile) or larger batches would help")
    elif busy_percent < 70.0:
        text = (f"the GPU is busy {busy_percent:.0f} % of the time, but its kernels are not launch-limited: look at "
                "the largest gaps (host work, data loading, synchronisation)")
    else:
        text = f"the GPU is busy {busy_percent:.0f} % of the time"
    return bound, text


def _curves_on_one_axis(blocks_per_rank: list[tuple[str, tuple["NDArray[np.int64]", "NDArray[np.int64]"]]]
                        ) -> tuple[BusyCurve, ...]:
    """Every rank's busy curve over the same span (all ranks' first start to last end), so the
    lanes of the chart line up in time."""
    spans = [(int(s[0]), int(e[-1])) for _, (s, e) in blocks_per_rank if len(s)]
    if not spans:
        return ()
    low, high = min(a for a, _ in spans), max(b for _, b in spans)
    return tuple(_curve(rank, blocks, low, high) for rank, blocks in blocks_per_rank)


def _curve(rank: str, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"], low: int, high: int) -> BusyCurve:
    import numpy as np
    buckets = MAX_CURVE_POINTS  # fewer would average a gap away
    width = max(1, -(-(high - low) // buckets))
    edges = low + width * np.arange(buckets + 1, dtype=np.int64)
    # busy time up to each edge, from the cumulative union
    s, e = blocks

    def busy_until(t: "NDArray[np.int64]") -> "NDArray[np.int64]":
        i = np.searchsorted(s, t, side="right")  # blocks starting at or before t
        partial = np.where(i > 0, np.minimum(t, e[np.maximum(i - 1, 0)]) - s[np.maximum(i - 1, 0)], 0)
        return _prefix_lengths(s, e, np.maximum(i - 1, 0)) * (i > 0) + np.clip(partial, 0, None)
    busy = np.diff(busy_until(edges)) / width
    return BusyCurve(rank=rank, start_ns=low, bucket_ns=int(width), busy=tuple(round(float(b), 4) for b in busy))


def _prefix_lengths(s: "NDArray[np.int64]", e: "NDArray[np.int64]", upto: "NDArray[np.int64]",
                    chunk_rows: int = CHUNK_ROWS) -> "NDArray[np.int64]":
    """The total length of blocks [0, k) for each k of `upto`, chunk by chunk (as a cumulative sum of
    every block's length would give, without that array)."""
    import numpy as np
    out = np.zeros(len(upto), dtype=np.int64)
    running = 0
    for at in range(0, len(s), chunk_rows):
        done = np.cumsum(e[at:at + chunk_rows] - s[at:at + chunk_rows])
        inside = (upto > at) & (upto <= at + len(done))
        out[inside] = running + done[upto[inside] - at - 1]
        running += int(done[-1])
    return out


# ---------------------------------------------------------------- steps
def steps_of(t: RankTimeline, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"] | None = None
             ) -> tuple[list[StepRow], str]:
    """Per-step rows over the rank's step windows (analysis/steps.py); `blocks`: the rank's busy
    blocks where analyse_rank already built them. A step's GPU busy time is the busy union clipped
    to its window; its top kernel is the kernel with the most GPU time among those the host launched
    inside the window (by launch correlation; by start time where the trace links no launches)."""
    import numpy as np
    from profilectl.analysis.steps import rank_steps
    steps = rank_steps(t)
    if not steps:
        return [], ""
    busy_blocks = _Blocks(blocks if blocks is not None else busy_union(t))
    kernels = t.kind == KERNEL
    collective = _collective(t)
    comm_blocks = _Blocks(_union(t.start[kernels & collective], t.end[kernels & collective]))
    launched = launch_times(t)[kernels]  # when each kernel was launched (its start where no launch is linked)
    order = np.argsort(launched, kind="stable")
    k_launched, k_name = launched[order], t.name[kernels][order]
    k_duration = (t.end[kernels] - t.start[kernels])[order]
    rows = []
    for position, window in enumerate(steps.windows):
        low, high = window.start, window.end
        busy = busy_blocks.within(low, high)
        first, stop = np.searchsorted(k_launched, [low, high], side="left")
        top, top_ns = None, 0
        if stop > first:
            per_name = np.bincount(k_name[first:stop], weights=k_duration[first:stop], minlength=len(t.names))
            best = int(per_name.argmax())
            top, top_ns = t.names[best], int(per_name[best])
        comm = comm_blocks.within(low, high)
        phase = steps.phase(position)
        rows.append(StepRow(step=window.step, name=window.name, wall_ns=window.wall_ns, gpu_busy_ns=busy,
                            busy_percent=100.0 * busy / window.wall_ns if window.wall_ns > 0 else 0.0, top_kernel=top,
                            top_kernel_ns=top_ns, communication_percent=100.0 * comm / busy if busy else 0.0,
                            warmup=phase == "warmup", rank=t.rank, last=phase == "last"))
    return rows, steps.source


def launch_times(t: RankTimeline) -> "NDArray[np.int64]":
    """When each GPU activity was launched: its launch call's start where the trace links it by
    correlation id, else the activity's own start (the one rule of "what a window launched")."""
    import numpy as np
    if not len(t.api_correlation) or not len(t.correlation):
        return t.start
    order = np.argsort(t.api_correlation, kind="stable")
    keys = t.api_correlation[order]
    at = np.clip(np.searchsorted(keys, t.correlation), 0, len(keys) - 1)
    linked = (np.asarray(t.correlation) >= 0) & (keys[at] == t.correlation)
    return np.where(linked, t.api_start[order][at], t.start)


def _merge_steps(per_rank: list[list[StepRow]]) -> list[StepRow]:
    """A job's step is as slow as its slowest rank: per step number, that rank's row."""
    by_step: dict[int, StepRow] = {}
    for rows in per_rank:
        for row in rows:
            have = by_step.get(row.step)
            if have is None or row.wall_ns > have.wall_ns:
                by_step[row.step] = row
    return [by_step[n] for n in sorted(by_step)]


# ---------------------------------------------------------------- all ranks
@dataclass(frozen=True)
class RankPiece:
    """What the job's timeline keeps of one rank: its row, gaps, busy blocks and steps. A rank's
    partial (report/partials.py) stores it, so a job merges these without its raw files."""
    row: TimelineRow
    gaps: tuple[Gap, ...]
    blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"]  # the busy union (starts, ends)
    steps: tuple[StepRow, ...]
    step_source: str


def rank_piece(t: RankTimeline) -> RankPiece:
    row, gaps, blocks = analyse_rank(t)
    steps, source = steps_of(t, blocks)
    return RankPiece(row=row, gaps=tuple(gaps), blocks=blocks, steps=tuple(steps), step_source=source)


def rank_order(rank: str, host: str | None) -> tuple[int, str, str]:
    """Ranks in number order, then names (pid 123), then host."""
    return int(rank) if rank.isdigit() else 1 << 30, rank, host or ""


def analyse(parts: Sequence[RankTimeline]) -> TimelineAnalysis | None:
    timelines = [t for t in combine(parts) if not t.empty]
    timelines.sort(key=lambda t: rank_order(t.rank, t.host))
    pieces = []
    for t in timelines:
        pieces.append(rank_piece(t))
        if len(timelines) > 1:  # several ranks' orders would add up: the idle analysis makes each again
            t.release_order()
    return analyse_pieces(pieces)


def analyse_pieces(pieces: Sequence[RankPiece]) -> TimelineAnalysis | None:
    """The job's timeline from its ranks' pieces, in rank order (rank_order)."""
    if not pieces:
        return None
    rows, curves, steps, sources = [], [], [], []
    gaps: list[Gap] = []
    for piece in pieces:
        rows.append(piece.row)
        gaps += piece.gaps
        curves.append((piece.row.rank, piece.blocks))
        if piece.steps:
            steps.append(list(piece.steps))
            sources.append(piece.step_source)
    merged_steps = _merge_steps(steps)
    slowest = tuple(r.step for r in sorted((r for r in merged_steps if r.steady), key=lambda r: -r.wall_ns)[:3])
    gaps.sort(key=lambda g: -g.duration_ns)
    busy = [r.busy_percent for r in rows]
    ranks_busy = RanksBusy(ranks=len(rows), mean_percent=sum(busy) / len(busy), min_percent=min(busy),
                           max_percent=max(busy)) if len(rows) > 1 else None
    return TimelineAnalysis(merged=_merged(rows, [blocks for _, blocks in curves]),
                            ranks=tuple(rows) if len(rows) > 1 else (), ranks_busy=ranks_busy,
                            gaps=tuple(gaps[:TOP_GAPS]), steps=tuple(merged_steps), slowest_steps=slowest,
                            step_source=sources[0] if sources else "",
                            curves=_curves_on_one_axis(curves))


def _union_of_ranks(blocks: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]], chunk_rows: int = CHUNK_ROWS
                    ) -> _UnionStream:
    """The union of several ranks' busy blocks (each sorted), window by window of start time, nothing
    kept but its figures: every rank's every step-th start bounds a window, so a window holds at
    most `chunk_rows` blocks whatever the ranks' lengths."""
    import numpy as np
    parts = [(s, e) for s, e in blocks if len(s)]
    union = _UnionStream(keep=False)
    if not parts:
        return union
    step = max(1, chunk_rows // len(parts))
    bounds = np.unique(np.concatenate([s[::step] for s, _ in parts]))
    edges = [None, *bounds[1:].tolist(), None]
    for low, high in zip(edges, edges[1:]):
        pieces = [(s[a:b], e[a:b]) for s, e in parts
                  for a, b in [(0 if low is None else int(np.searchsorted(s, low, side="left")),
                                len(s) if high is None else int(np.searchsorted(s, high, side="left")))] if b > a]
        if not pieces:
            continue
        start = np.concatenate([p[0] for p in pieces])
        end = np.concatenate([p[1] for p in pieces])
        order = np.argsort(start, kind="stable")
        union.add(start[order], end[order])
    return union


def _merged(rows: list[TimelineRow],
            blocks: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] | None = None) -> TimelineRow:
    """All ranks together. Times of the job (span, busy, idle, gaps) are unions on the ranks' clock,
    never sums: two ranks of 1.23 s each make a job of about 1.23 s, busy while any GPU is busy.
    (Ranks of one host share its clock; ranks of several hosts are compared on their own clocks,
    which NTP keeps within milliseconds.) GPU-time totals (compute, communication, copies) add up."""
    import numpy as np
    if len(rows) == 1:
        return rows[0]

    def total(name: str) -> int:
        return sum(int(getattr(r, name)) for r in rows)
    comm, hidden = total("communication_ns"), total("hidden_communication_ns")
    if blocks:
        union = _union_of_ranks(blocks)
        span = union.open[1] - union.first if union.open is not None and union.first is not None else 0
        busy, gaps, gap_total, largest = union.length, union.gaps, union.gap_total, union.largest_hole
    else:
        span, busy = total("span_ns"), total("busy_ns")
        gaps, gap_total, largest = total("gaps"), total("gap_total_ns"), max(r.largest_gap_ns for r in rows)
    kernel_time = sum(r.compute_ns + r.communication_ns for r in rows)
    short_time = sum(r.launch.short_kernel_percent * (r.compute_ns + r.communication_ns) / 100.0 for r in rows)
    delays = [r.launch.launch_delay_mean_ns for r in rows if r.launch.launch_delay_mean_ns is not None]
    depths = [r.launch.queue_depth_mean for r in rows if r.launch.queue_depth_mean is not None]
    maxima = [r.launch.queue_depth_max for r in rows if r.launch.queue_depth_max is not None]
    launch = LaunchStats(short_kernel_percent=100.0 * short_time / kernel_time if kernel_time else 0.0,
                         short_kernels=sum(r.launch.short_kernels for r in rows),
                         short_kernel_basis=rows[0].launch.short_kernel_basis,
                         launch_call_ns=sum(r.launch.launch_call_ns for r in rows),
                         launch_delay_mean_ns=sum(delays) / len(delays) if delays else None,
                         queue_depth_mean=sum(depths) / len(depths) if depths else None,
                         queue_depth_max=max(maxima) if maxima else None)
    busy_percent = 100.0 * busy / span if span else 0.0
    return TimelineRow(
        rank="any GPU", host=None, span_ns=span, busy_ns=busy, idle_ns=span - busy, busy_percent=busy_percent,
        gaps=gaps, gap_total_ns=gap_total, largest_gap_ns=largest,
        concurrent_ns=total("concurrent_ns"), max_concurrency=max(r.max_concurrency for r in rows),
        streams=total("streams"), compute_ns=total("compute_ns"), communication_ns=comm,
        hidden_communication_ns=hidden, hidden_communication_percent=100.0 * hidden / comm if comm else None,
        memory_ns=total("memory_ns"), launch=launch, launch_bound=(verdict := _verdict(busy_percent, launch, busy))[0],
        verdict=verdict[1])
