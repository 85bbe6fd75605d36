"""Nsight Compute `--csv` output: one row per (kernel launch, metric), "==PROF==" lines interleaved."""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import number, read_csv
from profilectl.formats.reader import Reader, first_bytes
from profilectl.formats.tables import DURATION_METRIC, CounterValue, KernelStats, StatsByName, Tables

DURATION_METRIC_NAME = "gpu__time_duration.sum"
_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}


def additive(metric: str, unit: str) -> bool:
    """Counts and byte/cycle/time totals add up over launches; rates, percentages and averages don't."""
    if unit in ("%",) or "/" in unit:
        return False
    return metric.endswith((".sum", ".max", ".min")) or "." not in metric


def metrics(path: Path) -> tuple[CounterValue, ...]:
    """One value per (kernel, metric): summed over launches for additive metrics (counts, bytes,
    durations), averaged for the rest (.pct, .ratio, .avg, per-second rates); launches counted."""
    totals: dict[tuple[str, str], tuple[float, int, str]] = {}
    for line, row in read_csv(path, ("Kernel Name", "Metric Name", "Metric Value"), skip_prefix="=="):
        value_text = row["Metric Value"]
        if value_text in ("", "n/a"):
            continue
        key = (row["Kernel Name"], row["Metric Name"])
        value, count, unit = totals.get(key, (0.0, 0, row.get("Metric Unit", "") or ""))
        totals[key] = (value + number(path, line, value_text), count + 1, unit)
    return tuple(CounterValue(kernel=k, counter=m, value=v if additive(m, u) else v / n, dispatches=n, unit=u)
                 for (k, m), (v, n, u) in totals.items())


def kernels(values: tuple[CounterValue, ...]) -> StatsByName:
    """Kernel times from the gpu__time_duration.sum metric, when it was collected (totals only:
    ncu reports no per-launch spread here)."""
    return {v.kernel: KernelStats.totals_only(v.dispatches, v.value * _TO_NS.get(v.unit, 1.0))
            for v in values if v.counter == DURATION_METRIC_NAME}


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
        values = metrics(path)
        timed = kernels(values)
        return Tables(kernels=timed, kernel_detail=DURATION_METRIC if timed else 0, counters=values)


def available_metrics(query_output: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` (a table: name, description, ...)."""
    names = set()
    for line in query_output.splitlines():
        first = line.split(None, 1)[0] if line.strip() else ""
        if "__" in first and not first.startswith("-"):
            names.add(first)
    return names


def metric_base(metric: str) -> str:
    """'sm__warps_launched.sum' -> 'sm__warps_launched' (query-metrics lists bases; suffixes roll up)."""
    return metric.split(".", 1)[0]
