"""The timeline model: what readers hand over and what the timeline analysis returns, as frozen
values over numpy columns. Nothing here imports anything above it (readers, analyses, reports)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = Sequence[int] | NDArray[Any]  # a column: a list, or a numpy array kept as it is

KERNEL, COPY = 0, 1  # RankTimeline.kind: a kernel, or a copy or memset

# A user annotation that names a training step: torch's ProfilerStep#N, or step N / step_N of ROCTx/NVTX.
STEP_NAME = re.compile(r"^(?:ProfilerStep#|step[ #_:-]?)(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Marker:
    """A step range on a rank's timeline (ProfilerStep#N, a step annotation): its name, start and end (ns), and
    whether the GPU side recorded it."""
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
    if high - low < 16:  # a few values (stream ids, rule indices): one comparison each, no wide copy
        return [v for v in range(low, high + 1) if v in (low, high) or bool((ids == v).any())]
    if low >= 0 and high < 1 << 16:  # ids of a small table, whatever their type
        return np.flatnonzero(np.bincount(ids, minlength=high + 1)).tolist()
    return sorted_distinct(ids).tolist()


def sorted_distinct(values: "NDArray[Any]") -> "NDArray[Any]":
    """np.unique(values) of a 1-D array: numpy 2's np.unique imports numpy.ma to ask whether the
    array is masked (15-20 ms of a cold start)."""
    import numpy as np
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


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
class HtaStreamIdle:
    """HTA's idle-time breakdown of one stream (host wait, kernel wait, other), in ns."""
    stream: str
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int


@dataclass(frozen=True)
class Gap:
    """An idle stretch of one rank's GPU: when it started, how long it lasted, and the activities either side of it."""
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
    """One timeline step (merged: the slowest rank's): its wall time, GPU busy time, top kernel, communication share."""
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
    """What the timeline analysis returns: the busy and idle row of the run (and of each rank), its largest gaps, its
    steps and busy curves."""
    merged: TimelineRow  # one rank's row; for a job, the union over its ranks ("any GPU busy")
    ranks: tuple[TimelineRow, ...] = ()  # per rank when there are several
    ranks_busy: RanksBusy | None = None  # a job's per-rank mean and range
    gaps: tuple[Gap, ...] = ()  # the largest idle gaps, all ranks
    steps: tuple[StepRow, ...] = ()  # per step (merged over ranks: the slowest rank's row)
    slowest_steps: tuple[int, ...] = ()  # step numbers, slowest first, warm-up left out
    step_source: str = ""  # "GPU-side ProfilerStep ranges" / "CPU-side ProfilerStep ranges"
    curves: tuple[BusyCurve, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

def rank_order(rank: str, host: str | None) -> tuple[int, str, str]:
    """Ranks in number order, then names (pid 123), then host."""
    return int(rank) if rank.isdigit() else 1 << 30, rank, host or ""


# ---------------------------------------------------------------- what readers hand their timelines to
class TimelineFeed(Protocol):
    """A rank's GPU activity passed on, batch by batch in file order, while a reader parses it
    (analysis/rank_stream.py StartOrderFeed): the timeline then costs no walk of its own."""

    @property
    def given_up(self) -> bool: ...

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            name: "NDArray[Any]", correlation: "NDArray[Any]", names: Sequence[str]) -> None: ...

    def finish(self, rank: str, host: str | None, names: Sequence[str], streams: Sequence[str]
               ) -> StreamedFigures | None: ...


class TimelineSink(Protocol):
    """What readers may give their timelines to as they read, so that memory does not hold every
    rank's columns: the analysis package registers itself (analysis/__init__.py), readers ask
    `sink()` and read as before where nothing is registered."""

    def feed(self, api_start: "NDArray[np.int64]", api_end: "NDArray[np.int64]",
             api_correlation: "NDArray[np.int64]", capacity: int, kind: int) -> TimelineFeed: ...

    def reduce(self, timelines: Sequence[RankTimeline]) -> tuple[Any, ...]: ...  # RankReduction each

    # each collective call (model.tables.CollectiveCall) with the compute its rank's kernels ran during it
    def collective_overlap(self, calls: Sequence[Any], timeline: RankTimeline) -> tuple[Any, ...]: ...


_SINKS: list[TimelineSink] = []


def register_sink(sink: TimelineSink) -> None:
    _SINKS[:] = [sink]


def sink() -> TimelineSink | None:
    return _SINKS[0] if _SINKS else None
