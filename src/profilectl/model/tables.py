"""Tables: what a reader makes of a tool's files, in a form that merges exactly.

Statistics are kept as running aggregates (count, sum, Welford M2, min, max), never as rows, so
files, passes, processes and ranks combine without re-reading anything (Chan et al.'s merge).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, TypeVar

from profilectl.model.collectives import InspectorRecord
from profilectl.model.memory import MemoryReport
from profilectl.model.operators import OperatorShape

if TYPE_CHECKING:  # numpy arrays inside: imported where a trace with timestamps is read
    from profilectl.model.reductions import RankReduction
    from profilectl.model.timeline import RankTimeline

# How a kernel's time was measured, best first. When several readers of one folder report kernels,
# the most detailed measurement wins (a per-dispatch trace beats ncu's duration metric, which beats
# legacy rocprof's pre-aggregated results.stats.csv); equal levels merge.
PER_DISPATCH = 3
DURATION_METRIC = 2
PRE_AGGREGATED = 1


@dataclass
class KernelStats:
    """Running statistics of one name's durations (ns). Mutable while a reader accumulates; a
    `Tables` hands out merged copies, never the reader's own objects."""
    calls: int = 0
    total: float = 0.0
    mean: float = 0.0
    m2: float = 0.0
    minimum: float = math.inf
    maximum: float = 0.0
    spread_known: bool = True  # False for tools that report only totals (no min/max/std)
    self_total: float | None = None  # time not spent in nested calls (torch.profiler operators); None: unknown

    def add(self, value: float) -> None:
        self.calls += 1
        self.total += value
        delta = value - self.mean
        self.mean += delta / self.calls
        self.m2 += delta * (value - self.mean)
        self.minimum = min(self.minimum, value)
        self.maximum = max(self.maximum, value)

    @classmethod
    def from_sums(cls, count: int, total: float, total_sq: float, minimum: float, maximum: float) -> "KernelStats":
        """From SQL/columnar aggregates (count, sum, sum of squares, min, max)."""
        mean = total / count if count else 0.0
        return cls(calls=count, total=total, mean=mean, m2=max(total_sq - total * mean, 0.0),
                   minimum=minimum, maximum=maximum)

    @classmethod
    def from_integer_sums(cls, count: int, total: int, total_sq: int, minimum: int, maximum: int,
                          self_total: int | None = None) -> "KernelStats":
        """From exact integer sums (ns): M2 = (n*sum(x^2) - sum(x)^2) / n without cancellation."""
        return cls(calls=count, total=float(total), mean=total / count if count else 0.0,
                   m2=(count * total_sq - total * total) / count if count else 0.0,
                   minimum=float(minimum), maximum=float(maximum),
                   self_total=None if self_total is None else float(self_total))

    @classmethod
    def totals_only(cls, calls: int, total: float) -> "KernelStats":
        return cls(calls=calls, total=total, mean=total / calls if calls else 0.0, spread_known=False)

    def copy(self) -> "KernelStats":
        clone = KernelStats.__new__(KernelStats)  # dataclasses.replace re-runs __init__: 10x slower
        clone.__dict__.update(self.__dict__)
        return clone

    def merge(self, other: "KernelStats") -> None:
        """Combine two partial aggregates exactly: files, ranks and passes merge."""
        if other.calls == 0:
            return
        if self.calls == 0:
            self.__dict__.update(other.__dict__)
            return
        calls = self.calls + other.calls
        delta = other.mean - self.mean
        self.m2 += other.m2 + delta * delta * self.calls * other.calls / calls
        self.mean += delta * other.calls / calls
        self.calls, self.total = calls, self.total + other.total
        self.minimum, self.maximum = min(self.minimum, other.minimum), max(self.maximum, other.maximum)
        self.spread_known = self.spread_known and other.spread_known
        self.self_total = (None if self.self_total is None or other.self_total is None
                           else self.self_total + other.self_total)

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.calls) if self.calls > 1 else 0.0


StatsByName = dict[str, KernelStats]


def merge_stats(*parts: StatsByName) -> StatsByName:
    out: StatsByName = {}
    for part in parts:
        for name, stats in part.items():
            if name in out:
                out[name].merge(stats)
            else:
                out[name] = stats.copy()
    return out




@dataclass(frozen=True)
class CounterValue:
    """One counter of one kernel over `dispatches` dispatches, kept so that any aggregation rule can
    be applied after files, passes and ranks are merged: the sum of the values, their sum weighted
    by dispatch duration (with the total weight), and the extremes. profiling/counters/_aggregation
    .yaml says which of these is the kernel's value."""
    kernel: str
    counter: str
    total: float  # sum of the per-dispatch values
    dispatches: int
    weighted: float = 0.0  # sum of value x dispatch duration (ns)
    weight: float = 0.0  # sum of the durations that weighted those values
    timed: int = 0  # dispatches whose duration is known (all of them: the mean is duration-weighted)
    minimum: float = math.inf
    maximum: float = -math.inf
    unit: str = ""

    @classmethod
    def of(cls, kernel: str, counter: str, values: Iterable[tuple[float, float | None]], unit: str = "") -> "CounterValue":
        """From (value, dispatch duration or None) pairs."""
        total = weighted = weight = 0.0
        count = timed = 0
        low, high = math.inf, -math.inf
        for value, duration in values:
            count += 1
            total += value
            low, high = min(low, value), max(high, value)
            if duration is not None and duration > 0:
                weighted += value * duration
                weight += duration
                timed += 1
        return cls(kernel, counter, total, count, weighted, weight, timed, low, high, unit)

    def combined(self, other: "CounterValue") -> "CounterValue":
        """This and another part of the same kernel's counter (another file, pass or rank)."""
        return CounterValue(self.kernel, self.counter, self.total + other.total, self.dispatches + other.dispatches,
                            self.weighted + other.weighted, self.weight + other.weight, self.timed + other.timed,
                            min(self.minimum, other.minimum), max(self.maximum, other.maximum), self.unit or other.unit)

    @property
    def duration_weighted(self) -> bool:
        """Every dispatch's duration is known: a mean is weighted by duration, else by dispatch."""
        return self.weight > 0 and self.timed == self.dispatches

    def value(self, aggregate: str) -> float:
        if aggregate == "mean":
            if self.duration_weighted:
                return self.weighted / self.weight
            return self.total / self.dispatches if self.dispatches else 0.0
        if aggregate == "max":
            return self.maximum
        if aggregate == "min":
            return self.minimum
        return self.total


@dataclass(frozen=True)
class AnnotationRow:
    """One user annotation name of one rank (torch's record_function / user_annotation ranges, the
    ProfilerStep#N steps), as key_averages() counts them: calls, total and self CPU time (integer ns);
    gpu_ns is the GPU time of the kernels, copies and memsets launched inside the range on its thread
    (by correlation id), None where the trace links no launch to its GPU activity."""
    rank: str
    name: str
    calls: int
    total_ns: int
    self_ns: int
    gpu_ns: int | None
    min_ns: int
    max_ns: int


@dataclass(frozen=True)
class HookSteps:
    """When each step of a traced rank ended (profilectl's start-up hook marks every step, also those
    outside the profiler's window) and which steps ran under the profiler: [first, end)."""
    rank: str
    host: str | None
    step_ends_ns: tuple[int, ...]
    profiled: tuple[int, int]


@dataclass(frozen=True)
class RankRow:
    """One process (rank) of a multi-process run: its GPU time (kernels), the part of it in
    collectives (NCCL/RCCL kernels), its heaviest kernel; for a rank with no GPU kernels, its
    operators' CPU self time, gloo/c10d operators and heaviest operator. Rows of the same rank merge."""
    rank: str
    kernels: int
    dispatches: int
    total_ns: float
    host: str | None = None
    collective_ns: float = 0.0
    top_kernel: str | None = None
    top_kernel_ns: float = 0.0
    status: str | None = None  # how the rank ended, where the run knows (ok, exit code 3, ...)
    basis: str = ""  # gpu: kernel time; cpu: operators' self time (the rank ran no GPU kernel); "": no times
    # From the rank's status file (profilectl's start-up hook): when it failed or was stopped (wall
    # clock, ns since the epoch), its exception line, the signal that stopped it
    failed_unix_ns: int | None = None
    error: str | None = None
    signal: int | None = None


@dataclass(frozen=True)
class CollectiveCall:
    """One collective or point-to-point operation of one rank, as torch records it: the host range
    `record_param_comms` (side "host") and the NCCL/RCCL kernel onto which Kineto copies the same args
    (side "gpu"). Kept call by call, in the rank's order, for matching one operation across ranks:
    exactly by (process_group, sequence) where the trace has sequence numbers, else by (process_group,
    name, the call's position among that group's calls on the rank). Times are on the rank's trace
    clock in ns, like its timeline (TraceClock gives the epoch). Each field's key in the trace is in
    its comment (formats/chrome_events.py COLLECTIVE_ARGS reads them); None where the trace lacks it."""
    rank: str
    side: str  # "host" or "gpu"
    event: str  # the event's name: record_param_comms, or the kernel's (ncclDevKernel_AllReduce_...)
    name: str  # "Collective name": allreduce, allgather, _allgather_base, reduce_scatter, send, recv ...
    process_group: str | None  # "Process Group Name" (torch >= 2.2), else "Process Group ID"
    process_group_desc: str | None  # "Process Group Description": default_pg, ...
    sequence: int | None  # "Seq" ("seq"): the group's count of its collectives, the same on every member
    start_ns: int
    end_ns: int
    in_elements: int | None  # "In msg nelems"
    out_elements: int | None  # "Out msg nelems"
    group_size: int | None  # "Group size"
    dtype: str | None
    group_ranks: str | None  # "Process Group Ranks", as written ("[0, 1]")
    # ns of the call that compute kernels of the rank covered (analysis/collective_calls.py, at read time)
    compute_overlap_ns: int | None = None


@dataclass(frozen=True)
class TraceClock:
    """Where one rank's trace clock stands: a time t (ns) of its tables and timeline is t + base_ns ns
    since the Unix epoch. From Kineto's `baseTimeNanoseconds` (April 2024 on: timestamps are written
    relative to a base floored to three months, libkineto/src/output_json.h ChromeTraceBaseTime), so
    ranks whose traces have different bases are put on one clock exactly; a wall clock, so ranks on
    different hosts agree to their clocks' synchronisation (NTP)."""
    rank: str
    host: str | None
    base_ns: int
    source: str  # the key it was read from


@dataclass(frozen=True)
class Source:
    """Files one reader recognised."""
    kind: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Tables:
    """Everything a reader took from a tool's files (name statistics, counters, timelines, ranks, collectives, memory
    history), in a form that merges with another's."""
    kernels: StatsByName = field(default_factory=dict)
    kernel_detail: int = 0  # PER_DISPATCH, DURATION_METRIC, PRE_AGGREGATED; 0: no kernels
    api: StatsByName = field(default_factory=dict)
    memory_copies: StatsByName = field(default_factory=dict)
    operators: StatsByName = field(default_factory=dict)
    annotations: tuple[AnnotationRow, ...] = ()  # per rank: rows of several ranks are kept apart
    counters: tuple[CounterValue, ...] = ()
    timing_s: tuple[float, ...] = ()  # seconds of each timed run (timing backend)
    # When each step ended (ns, one process's monotonic clock), per timed process (profilectl's hook)
    step_ends_ns: tuple[tuple[int, ...], ...] = ()
    # GPU activity with timestamps, per process (analysis/timeline.py); empty for tools without them
    timelines: tuple["RankTimeline", ...] = ()
    # Ranks' timelines reduced as they were read, in their place (formats/reader.py read_groups; None:
    # none was; a reduction per non-empty timeline): summary.build takes them as `reduced`
    reductions: tuple["RankReduction", ...] | None = None
    ranks: tuple[RankRow, ...] = ()
    trace_files: tuple[str, ...] = ()  # files that open in Perfetto
    sources: tuple[Source, ...] = ()
    notes: tuple[str, ...] = ()
    # How kernel durations were measured where it is not a plain trace (ncu replays each kernel)
    kernel_timing: str = ""
    # PC sampling: samples per (kernel, instruction, source line), and per stall reason (stochastic)
    pc_samples: dict[tuple[str, str, str], int] = field(default_factory=dict)
    stall_reasons: dict[str, int] = field(default_factory=dict)
    collectives: tuple[CollectiveCall, ...] = ()  # per rank, in each rank's order
    clocks: tuple[TraceClock, ...] = ()
    hook_steps: tuple[HookSteps, ...] = ()  # a traced job's step ends per rank, inside and outside the window
    operator_shapes: tuple[OperatorShape, ...] = ()  # operators recorded with shapes (formats/torch_shapes.py)
    memory: tuple[MemoryReport, ...] = ()  # torch's memory history, per rank and device (formats/torch_memory.py)
    inspector: tuple[InspectorRecord, ...] = ()  # the NCCL/RCCL inspector plugin's records (formats/nccl_inspector.py)

    @property
    def has_data(self) -> bool:
        return bool(self.kernels or self.api or self.memory_copies or self.operators or self.annotations or self.counters
                    or self.timing_s or self.trace_files or self.pc_samples or self.memory or self.inspector)

    def merge(self, other: "Tables") -> "Tables":
        if other.kernel_detail > self.kernel_detail:
            kernels, detail = merge_stats(other.kernels), other.kernel_detail
        elif other.kernel_detail == self.kernel_detail:
            kernels, detail = merge_stats(self.kernels, other.kernels), self.kernel_detail
        else:
            kernels, detail = self.kernels, self.kernel_detail
        return Tables(kernels=kernels, kernel_detail=detail,
                      api=merge_stats(self.api, other.api),
                      memory_copies=merge_stats(self.memory_copies, other.memory_copies),
                      operators=merge_stats(self.operators, other.operators),
                      annotations=self.annotations + other.annotations,
                      counters=self.counters + other.counters, timing_s=self.timing_s + other.timing_s,
                      step_ends_ns=self.step_ends_ns + other.step_ends_ns, timelines=self.timelines + other.timelines,
                      reductions=_joined(self.reductions, other.reductions),
                      ranks=self.ranks + other.ranks, trace_files=self.trace_files + other.trace_files,
                      pc_samples=_add_counts(self.pc_samples, other.pc_samples),
                      stall_reasons=_add_counts(self.stall_reasons, other.stall_reasons),
                      kernel_timing=self.kernel_timing or other.kernel_timing,
                      sources=self.sources + other.sources, notes=self.notes + other.notes,
                      collectives=self.collectives + other.collectives, clocks=self.clocks + other.clocks,
                      hook_steps=self.hook_steps + other.hook_steps,
                      operator_shapes=self.operator_shapes + other.operator_shapes, memory=self.memory + other.memory,
                      inspector=self.inspector + other.inspector)


K = TypeVar("K")
V = TypeVar("V")


def _joined(a: tuple[V, ...] | None, b: tuple[V, ...] | None) -> tuple[V, ...] | None:
    return a if b is None else b if a is None else a + b


def _add_counts(a: dict[K, int], b: dict[K, int]) -> dict[K, int]:
    out = dict(a)
    for key, count in b.items():
        out[key] = out.get(key, 0) + count
    return out


def merge_all(parts: Iterable[Tables]) -> Tables:
    out = Tables()
    for part in parts:
        out = out.merge(part)
    return out
