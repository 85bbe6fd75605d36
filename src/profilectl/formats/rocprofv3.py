"""rocprofv3 CSV output (<dir>/<hostname>/<pid>_kernel_trace.csv, _counter_collection.csv,
_hip_api_trace.csv, _memory_copy_trace.csv ...), its Perfetto files, and its counter listing.

Columns by name: 6.2 kernel traces lack Stream_Id/Thread_Id, and the 6.2 counter collection has 15
columns instead of 19; only the columns read here are required.
"""

from __future__ import annotations

from pathlib import Path

from profilectl.formats import polars_csv
from profilectl.formats.common import number, read_csv
from profilectl.formats.reader import Reader
from profilectl.formats.tables import (PER_DISPATCH, CounterValue, KernelStats, RankRow, StatsByName, Tables,
                                       merge_stats)

KINDS = ("kernel_trace", "counter_collection", "hip_api_trace", "hip_runtime_api_trace", "memory_copy_trace")
API_KINDS = ("hip_api_trace", "hip_runtime_api_trace")


def kind_of(name: str) -> str | None:
    """<pid>_kernel_trace.csv -> kernel_trace (a file renamed without its pid prefix still counts)."""
    for kind in KINDS:
        if name == f"{kind}.csv" or name.endswith(f"_{kind}.csv"):
            return kind
    return None


def interval_stats(path: Path, name_col: str, fast: bool | None = None) -> StatsByName:
    """Duration (End - Start) statistics per value of name_col, for any rocprofv3 trace file:
    polars for large files when installed, else the csv module (the same numbers)."""
    if fast is None:
        fast = path.stat().st_size >= polars_csv.FAST_PATH_MIN_BYTES and polars_csv.fast_engine_available()
    if fast:
        return polars_csv.grouped_durations_csv(path, name_col, "Start_Timestamp", "End_Timestamp")
    stats: StatsByName = {}
    for line, row in read_csv(path, (name_col, "Start_Timestamp", "End_Timestamp")):
        duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
        stats.setdefault(row[name_col], KernelStats()).add(duration)
    return stats


def rank_of(path: Path) -> str:
    """rocprofv3 names files <dir>/<hostname>/<pid>_<kind>.csv: the rank is host/pid."""
    pid = path.name.split("_", 1)[0]
    return f"{path.parent.name}/{pid}" if pid.isdigit() else path.stem


def kernel_trace(paths: list[Path], fast: bool | None = None) -> tuple[StatsByName, tuple[RankRow, ...]]:
    """All kernel traces merged, and one summary row per rank (process)."""
    merged: StatsByName = {}
    ranks: dict[str, tuple[set[str], int, float]] = {}
    for path in paths:
        per_file = interval_stats(path, "Kernel_Name", fast)
        merged = merge_stats(merged, per_file)
        names, dispatches, total = ranks.get(rank_of(path), (set(), 0, 0.0))
        ranks[rank_of(path)] = (names | set(per_file), dispatches + sum(s.calls for s in per_file.values()),
                                total + sum(s.total for s in per_file.values()))
    rows = tuple(RankRow(rank=rank, kernels=len(names), dispatches=dispatches, total_ns=total)
                 for rank, (names, dispatches, total) in sorted(ranks.items()))
    return merged, rows


def named_intervals(paths: list[Path], name_col: str) -> StatsByName:
    return merge_stats(*(interval_stats(path, name_col) for path in paths))


def counter_collection(paths: list[Path]) -> tuple[CounterValue, ...]:
    """One value per (kernel, counter): summed over dispatches, with the dispatch count.

    Each pass re-runs the application, so a kernel's dispatches appear once per pass; the counter
    values of a pass are summed over that pass's dispatches, and `dispatches` counts them.
    """
    totals: dict[tuple[str, str], list[float]] = {}
    for path in paths:
        for line, row in read_csv(path, ("Kernel_Name", "Counter_Name", "Counter_Value")):
            entry = totals.setdefault((row["Kernel_Name"], row["Counter_Name"]), [0.0, 0])
            entry[0] += number(path, line, row["Counter_Value"])
            entry[1] += 1
    return tuple(CounterValue(kernel=k, counter=c, value=v, dispatches=int(n)) for (k, c), (v, n) in totals.items())


class Rocprofv3CsvReader(Reader):
    kind = "rocprofv3-csv"

    def recognises(self, path: Path) -> bool:
        return kind_of(path.name) is not None

    def read(self, files: list[Path]) -> Tables:
        by_kind: dict[str, list[Path]] = {}
        for path in files:
            by_kind.setdefault(kind_of(path.name) or "", []).append(path)
        kernels, ranks = kernel_trace(by_kind["kernel_trace"]) if "kernel_trace" in by_kind else ({}, ())
        api = [p for kind in API_KINDS for p in by_kind.get(kind, [])]
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0,
                      api=named_intervals(api, "Function") if api else {},
                      memory_copies=named_intervals(by_kind.get("memory_copy_trace", []), "Direction"),
                      counters=counter_collection(by_kind.get("counter_collection", [])),
                      ranks=ranks if len(ranks) > 1 else ())


class PerfettoTraceReader(Reader):
    """rocprofv3's --output-format pftrace files: opened in Perfetto, nothing to tabulate."""
    kind = "perfetto-trace"

    def recognises(self, path: Path) -> bool:
        return path.suffix == ".pftrace"

    def read_file(self, path: Path) -> Tables:
        return Tables(trace_files=(str(path),))


def available_counters(list_output: str) -> set[str]:
    """Counter names from `rocprofv3 -L` / `rocprofv3 --list-avail` output."""
    names = set()
    for line in list_output.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Counter_Name" and value.strip():
            names.add(value.strip())
    return names
