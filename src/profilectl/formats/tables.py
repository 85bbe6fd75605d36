"""Tables: what a reader makes of a tool's files, in a form that merges exactly.

Statistics are kept as running aggregates (count, sum, Welford M2, min, max), never as rows, so
files, passes, processes and ranks combine without re-reading anything (Chan et al.'s merge).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable

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
    def totals_only(cls, calls: int, total: float) -> "KernelStats":
        return cls(calls=calls, total=total, mean=total / calls if calls else 0.0, spread_known=False)

    def copy(self) -> "KernelStats":
        return replace(self)

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
    """One counter of one kernel: the sum of its per-dispatch values, over `dispatches` dispatches."""
    kernel: str
    counter: str
    value: float
    dispatches: int
    unit: str = ""


@dataclass(frozen=True)
class RankRow:
    """One process (rank) of a multi-process run."""
    rank: str
    kernels: int
    dispatches: int
    total_ns: float


@dataclass(frozen=True)
class Source:
    """Files one reader recognised."""
    kind: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Tables:
    kernels: StatsByName = field(default_factory=dict)
    kernel_detail: int = 0  # PER_DISPATCH, DURATION_METRIC, PRE_AGGREGATED; 0: no kernels
    api: StatsByName = field(default_factory=dict)
    memory_copies: StatsByName = field(default_factory=dict)
    operators: StatsByName = field(default_factory=dict)
    counters: tuple[CounterValue, ...] = ()
    timing_s: tuple[float, ...] = ()  # seconds of each timed run (timing backend)
    ranks: tuple[RankRow, ...] = ()
    trace_files: tuple[str, ...] = ()  # files that open in Perfetto
    sources: tuple[Source, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def has_data(self) -> bool:
        return bool(self.kernels or self.api or self.memory_copies or self.operators or self.counters
                    or self.timing_s or self.trace_files)

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
                      counters=self.counters + other.counters, timing_s=self.timing_s + other.timing_s,
                      ranks=self.ranks + other.ranks, trace_files=self.trace_files + other.trace_files,
                      sources=self.sources + other.sources, notes=self.notes + other.notes)


def merge_all(parts: Iterable[Tables]) -> Tables:
    out = Tables()
    for part in parts:
        out = out.merge(part)
    return out
