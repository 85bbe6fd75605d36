"""Nsight Compute `--csv` output: one row per (kernel launch, metric), "==PROF==" lines interleaved."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profilectl.formats.common import number, read_csv
from profilectl.formats.reader import Reader, first_bytes
from profilectl.formats.tables import DURATION_METRIC, CounterValue, KernelStats, StatsByName, Tables

DURATION_METRIC_NAME = "gpu__time_duration.sum"
_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}


@dataclass
class Launch:
    """One profiled kernel launch: its metric values and, when collected, its duration."""
    kernel: str
    values: dict[str, tuple[float, str]] = field(default_factory=dict)  # metric -> (value, unit)

    @property
    def duration_ns(self) -> float | None:
        found = self.values.get(DURATION_METRIC_NAME)
        return found[0] * _TO_NS.get(found[1], 1.0) if found else None


def launches(path: Path) -> list[Launch]:
    """Rows grouped by launch (the ID column, per process): ncu writes one row per launch and metric."""
    by_id: dict[tuple[str, str], Launch] = {}
    for line, row in read_csv(path, ("Kernel Name", "Metric Name", "Metric Value"), skip_prefix="=="):
        value_text = row["Metric Value"]
        if value_text in ("", "n/a"):
            continue
        key = (row.get("Process ID") or "", row.get("ID") or f"row {line}")
        launch = by_id.setdefault(key, Launch(row["Kernel Name"]))
        launch.values[row["Metric Name"]] = (number(path, line, value_text), row.get("Metric Unit", "") or "")
    return list(by_id.values())


def metrics(launched: list[Launch]) -> tuple[CounterValue, ...]:
    """Per (kernel, metric): every launch's value with that launch's duration (weights for means)."""
    values: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    units: dict[str, str] = {}
    for launch in launched:
        for metric, (value, unit) in launch.values.items():
            values.setdefault((launch.kernel, metric), []).append((value, launch.duration_ns))
            units[metric] = unit
    return tuple(CounterValue.of(kernel, metric, items, units[metric]) for (kernel, metric), items in values.items())


def kernels(launched: list[Launch]) -> StatsByName:
    """Kernel times from each launch's gpu__time_duration.sum, when it was collected."""
    stats: StatsByName = {}
    for launch in launched:
        duration = launch.duration_ns
        if duration is not None:
            stats.setdefault(launch.kernel, KernelStats()).add(duration)
    return stats


def is_ncu_csv(path: Path) -> bool:
    if path.suffix != ".csv":
        return False
    for line in first_bytes(path).decode(errors="replace").splitlines():
        if not line.startswith("=="):  # ncu interleaves ==PROF== lines
            return '"Metric Name"' in line or "Metric Name" in line.split(",")
    return False


class NcuCsvReader(Reader):
    kind = "ncu-csv"

    def recognises(self, path: Path) -> bool:
        return is_ncu_csv(path)

    def read_file(self, path: Path) -> Tables:
        launched = launches(path)
        timed = kernels(launched)
        return Tables(kernels=timed, kernel_detail=DURATION_METRIC if timed else 0, counters=metrics(launched),
                      kernel_timing="Nsight Compute kernel replay (clock control not recorded in the CSV; ncu's "
                                    "default locks clocks to base)" if timed else "")


# Launch statistics (Nsight Compute's LaunchStatistics and Occupancy sections): ncu --metrics takes
# them, --query-metrics does not list them (it lists hardware counters only).
LAUNCH_METRICS = frozenset({"launch__waves_per_multiprocessor", "launch__grid_size", "launch__block_size",
                            "launch__registers_per_thread", "launch__sm_count", "launch__occupancy_limit_warps",
                            "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
                            "launch__occupancy_limit_blocks", "launch__shared_mem_per_block"})


def available_metrics(query_output: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` (a table: name, description, ...)."""
    names = set()
    for line in query_output.splitlines():
        first = line.split(None, 1)[0] if line.strip() else ""
        if "__" in first and not first.startswith("-"):
            names.add(first)
    return names | LAUNCH_METRICS if names else names  # launch statistics: accepted, never listed


def metric_base(metric: str) -> str:
    """'sm__warps_launched.sum' -> 'sm__warps_launched' (query-metrics lists bases; suffixes roll up)."""
    return metric.split(".", 1)[0]
