"""Legacy rocprof (v1) results.csv / results.stats.csv / results.json, its API and copy statistics
(results.hip_stats.csv with --hip-trace, results.hsa_stats.csv with --hsa-trace,
results.copy_stats.csv for memory copies; the same "Name","Calls","TotalDurationNs","AverageNs",
"Percentage" layout as results.stats.csv, rocprofiler v1 bin/tblextr.py), and rocprofv2's
results_<pid>.csv. Any of the stats files is read alone or together with the others."""

from __future__ import annotations

from pathlib import Path

from profilectl.errors import FormatError
from profilectl.formats.common import csv_header, number, read_csv
from profilectl.formats.reader import Reader
from profilectl.model.tables import (PER_DISPATCH, PRE_AGGREGATED, CounterValue, KernelStats, StatsByName,
                                       Tables)

# Per-dispatch columns that are not counters.
_NON_COUNTER = {"Index", "KernelName", "Kernel_Name", "gpu-id", "queue-id", "queue-index", "pid", "tid",
                "grd", "wgr", "lds", "scr", "arch_vgpr", "accum_vgpr", "sgpr", "wave_size", "sig", "obj",
                "vgpr", "DispatchNs", "BeginNs", "EndNs", "CompleteNs", "Dispatch_ID", "GPU_ID",
                "Queue_ID", "Queue_Index", "PID", "TID", "Grid_Size", "Workgroup_Size", "LDS_Per_Workgroup",
                "Scratch_Per_Workitem", "Arch_VGPR", "Accum_VGPR", "SGPR", "Wave_Size", "Signal_Handle",
                "Kernel_Object", "Start_Timestamp", "End_Timestamp", "Correlation_ID",
                "DurationNs"}  # v1 writes the dispatch's duration as a column: a time, not a hardware counter


def is_results_file(name: str) -> bool:
    return name == "results.csv" or (name.startswith("results_") and name.endswith(".csv") and name[8:-4].isdigit())


def results(path: Path) -> tuple[StatsByName, tuple[CounterValue, ...]]:
    """(kernel statistics, counters) from a v1 results.csv or v2 results_<pid>.csv."""
    header = csv_header(path)
    name_col = "KernelName" if "KernelName" in header else "Kernel_Name"
    if name_col not in header:
        raise FormatError(f"{path}: not a rocprof results file: no KernelName/Kernel_Name column")
    begin, end = (("BeginNs", "EndNs") if "BeginNs" in header else
                  ("Start_Timestamp", "End_Timestamp") if "Start_Timestamp" in header else (None, None))
    counter_cols = [c for c in header if c not in _NON_COUNTER]
    stats: StatsByName = {}
    values: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    for line, row in read_csv(path, [name_col]):
        name = row[name_col]
        duration = number(path, line, row[end]) - number(path, line, row[begin]) if begin and end else None
        if duration is not None:
            stats.setdefault(name, KernelStats()).add(duration)
        for col in counter_cols:
            if row.get(col) not in (None, ""):
                values.setdefault((name, col), []).append((number(path, line, row[col]), duration))
    counters = tuple(CounterValue.of(kernel, counter, items) for (kernel, counter), items in values.items())
    return stats, counters


def stats_file(path: Path) -> StatsByName:
    """results.stats.csv: Name, Calls, TotalDurationNs, AverageNs, Percentage (already aggregated)."""
    stats: StatsByName = {}
    for line, row in read_csv(path, ("Name", "Calls", "TotalDurationNs")):
        calls = int(number(path, line, row["Calls"]))
        stats[row["Name"]] = KernelStats.totals_only(calls, number(path, line, row["TotalDurationNs"]))
    return stats


class ResultsReader(Reader):
    kind = "rocprof-results"

    def recognises(self, path: Path) -> bool:
        return is_results_file(path.name)

    def read_file(self, path: Path) -> Tables:
        kernels, counters = results(path)
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0, counters=counters)


# <prefix>.<kind>.csv beside results.csv (the prefix is -o's stem: results by default)
STATS_KINDS = {"stats": "kernels", "hip_stats": "api", "hsa_stats": "api", "copy_stats": "memory_copies"}


def stats_kind(name: str) -> str | None:
    """results.hip_stats.csv -> hip_stats; None for any other file."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[-1] == "csv" and parts[-2] in STATS_KINDS:
        return parts[-2]
    return None


class StatsReader(Reader):
    kind = "rocprof-stats"

    def recognises(self, path: Path) -> bool:
        if stats_kind(path.name) is None:
            return False
        try:
            return "Calls" in csv_header(path)
        except FormatError:
            return False

    def read_file(self, path: Path) -> Tables:
        table = STATS_KINDS[stats_kind(path.name) or "stats"]
        stats = stats_file(path)
        if table == "kernels":
            return Tables(kernels=stats, kernel_detail=PRE_AGGREGATED)
        return Tables(api=stats) if table == "api" else Tables(memory_copies=stats)


class TraceReader(Reader):
    """v1's results.json (a Chrome trace of the run): opened in Perfetto, not tabulated."""
    kind = "rocprof-trace"

    def recognises(self, path: Path) -> bool:
        return path.name == "results.json"

    def read_file(self, path: Path) -> Tables:
        return Tables(trace_files=(str(path),))
