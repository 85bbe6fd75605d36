"""Summary: what a report shows, computed once from Tables and stored as summary.json.

Reporting a finished run reads this file only, so it costs the same whatever the trace size; a
bare output directory's summary is cached outside the user's files (report/cache.py).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilectl.countersets import evaluate
from profilectl.envreport import Fallback
from profilectl.files import load_typed, read_json, write_json_atomic
from profilectl.formats.tables import CounterValue, StatsByName, Tables
from profilectl.manifest import Manifest

SUMMARY_SCHEMA = 1
# The name-statistics tables of a summary, in report order: (attribute, heading).
SECTIONS = (("kernels", "Top kernels"), ("api", "API calls"), ("memory_copies", "Memory copies"),
            ("operators", "Operators (CPU)"))


@dataclass(frozen=True)
class KernelRow:
    """One name's statistics (kernels, API calls, copies, operators), times in ns. min/max/std are
    None where the tool reports totals only (ncu's duration metric, rocprof's stats file)."""
    name: str
    calls: int
    total_ns: float
    mean_ns: float
    percent: float
    min_ns: float | None = None
    max_ns: float | None = None
    std_ns: float | None = None


@dataclass(frozen=True)
class RankSummary:
    rank: str
    kernels: int
    dispatches: int
    total_ns: float


@dataclass(frozen=True)
class TimingStats:
    runs: int
    mean_s: float
    median_s: float
    p95_s: float
    min_s: float
    max_s: float
    std_s: float


@dataclass(frozen=True)
class SourceInfo:
    kind: str
    path: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Totals:
    kernels: int = 0
    dispatches: int = 0
    gpu_time_ns: float = 0.0


@dataclass(frozen=True)
class RunStory:
    """What a report shows of a run's manifest: the service, the choice and the fallback story."""
    service: str
    backend: str
    reason: str
    fallbacks: tuple[Fallback, ...]
    status: str
    message: str | None
    exit_code: int | None
    started_at: str
    wall_seconds: float | None
    workload: tuple[str, ...]
    notes: tuple[str, ...]

    @classmethod
    def of(cls, manifest: Manifest) -> "RunStory":
        return cls(**{f.name: getattr(manifest, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Summary:
    source: SourceInfo
    totals: Totals = field(default_factory=Totals)
    kernels: tuple[KernelRow, ...] = ()
    api: tuple[KernelRow, ...] = ()
    memory_copies: tuple[KernelRow, ...] = ()
    operators: tuple[KernelRow, ...] = ()
    counters_by_kernel: tuple[dict[str, Any], ...] = ()  # kernel, then one column per counter/metric
    derived: tuple[str, ...] = ()
    ranks: tuple[RankSummary, ...] = ()
    timing: TimingStats | None = None
    perfetto_trace: str | None = None
    run: RunStory | None = None
    status: str | None = None
    notes: tuple[str, ...] = ()
    cache_hit: bool = False
    schema_version: int = SUMMARY_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.to_dict(), indent=None)  # machine-read: compact, C encoder

    @classmethod
    def from_dict(cls, data: Any, source: str | Path) -> "Summary":
        return load_typed(cls, data, source, "profilectl summary")

    @classmethod
    def read(cls, path: Path) -> "Summary":
        return cls.from_dict(read_json(path), path)


def kernel_rows(stats: StatsByName) -> tuple[KernelRow, ...]:
    grand = sum(s.total for s in stats.values()) or 1.0
    rows = [KernelRow(name=name, calls=s.calls, total_ns=s.total, mean_ns=s.mean, percent=100.0 * s.total / grand,
                      min_ns=s.minimum if s.spread_known else None, max_ns=s.maximum if s.spread_known else None,
                      std_ns=s.std if s.spread_known else None)
            for name, s in stats.items()]
    rows.sort(key=lambda r: r.total_ns, reverse=True)
    return tuple(rows)


def timing_stats(seconds: tuple[float, ...]) -> TimingStats | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    p95_index = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return TimingStats(runs=len(ordered), mean_s=statistics.fmean(ordered), median_s=statistics.median(ordered),
                       p95_s=ordered[p95_index], min_s=ordered[0], max_s=ordered[-1],
                       std_s=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0)


def counters_by_kernel(values: tuple[CounterValue, ...], derived: dict[str, str]) -> tuple[dict[str, Any], ...]:
    """Wide table: one row per kernel, one column per counter, then the derived metrics."""
    kernels: dict[str, dict[str, Any]] = {}
    for value in values:
        kernels.setdefault(value.kernel, {"kernel": value.kernel})[value.counter] = value.value
    for row in kernels.values():
        numbers = {k: v for k, v in row.items() if k != "kernel"}
        for name, expression in derived.items():
            result = evaluate(expression, numbers)
            if result is not None:
                row[name] = result
    return tuple(kernels.values())


def build(tables: Tables, source: SourceInfo, derived: dict[str, str] | None = None,
          perfetto_trace: str | None = None) -> Summary:
    kernels = kernel_rows(tables.kernels)
    return Summary(
        source=source,
        totals=Totals(kernels=len(kernels), dispatches=sum(k.calls for k in kernels),
                      gpu_time_ns=sum(k.total_ns for k in kernels)),
        kernels=kernels, api=kernel_rows(tables.api), memory_copies=kernel_rows(tables.memory_copies),
        operators=kernel_rows(tables.operators),
        counters_by_kernel=counters_by_kernel(tables.counters, derived or {}),
        derived=tuple(sorted((derived or {}).keys())),
        ranks=tuple(RankSummary(rank=r.rank, kernels=r.kernels, dispatches=r.dispatches, total_ns=r.total_ns)
                    for r in tables.ranks),
        timing=timing_stats(tables.timing_s), perfetto_trace=perfetto_trace, notes=tables.notes)
