"""rocprofv3 CSV output (<pid>_kernel_trace.csv, _counter_collection.csv, _hip_api_trace.csv, ...).

Columns by name: 6.2 kernel traces lack Stream_Id/Thread_Id, and the 6.2 counter collection has 15
columns instead of 19; only the columns read here are required.
"""

from __future__ import annotations

from pathlib import Path

from profilectl.formats import engine
from profilectl.formats.common import KernelStats, kernel_rows, number, read_csv


def interval_stats(path: Path, name_col: str, fast: bool | None = None) -> dict[str, KernelStats]:
    """Duration (End - Start) statistics per value of name_col, for any rocprofv3 trace file:
    polars for large files when installed, else the csv module (the same numbers)."""
    if fast is None:
        fast = path.stat().st_size >= engine.FAST_PATH_MIN_BYTES and engine.fast_engine_available()
    if fast:
        return engine.grouped_durations_csv(path, name_col, "Start_Timestamp", "End_Timestamp")
    stats: dict[str, KernelStats] = {}
    for line, row in read_csv(path, (name_col, "Start_Timestamp", "End_Timestamp")):
        duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
        stats.setdefault(row[name_col], KernelStats()).add(duration)
    return stats


def _merged(paths: list[Path], name_col: str) -> list[dict]:
    stats: dict[str, KernelStats] = {}
    for path in paths:
        for name, part in interval_stats(path, name_col).items():
            stats.setdefault(name, KernelStats()).merge(part)
    return kernel_rows(stats)


def rank_of(path: Path) -> str:
    """rocprofv3 names files <dir>/<hostname>/<pid>_<kind>.csv: the rank is host/pid."""
    pid = path.name.split("_", 1)[0]
    return f"{path.parent.name}/{pid}" if pid.isdigit() else path.stem


def kernel_trace(paths: list[Path], fast: bool | None = None) -> list[dict]:
    return kernel_rows(merged_kernel_stats(paths, fast)[0])


def merged_kernel_stats(paths: list[Path], fast: bool | None = None) -> tuple[dict[str, KernelStats], list[dict]]:
    """All files merged, and one summary row per rank (process)."""
    merged: dict[str, KernelStats] = {}
    ranks: dict[str, dict] = {}
    for path in paths:
        per_file = interval_stats(path, "Kernel_Name", fast)
        rank = ranks.setdefault(rank_of(path), {"rank": rank_of(path), "kernels": set(), "dispatches": 0, "total_ns": 0.0})
        for name, stats in per_file.items():
            merged.setdefault(name, KernelStats()).merge(stats)
            rank["kernels"].add(name)
            rank["dispatches"] += stats.calls
            rank["total_ns"] += stats.total
    rank_rows = [{**r, "kernels": len(r["kernels"])} for r in ranks.values()]
    return merged, sorted(rank_rows, key=lambda r: r["rank"])


def api_trace(paths: list[Path]) -> list[dict]:
    return _merged(paths, "Function")


def memory_copies(paths: list[Path]) -> list[dict]:
    return _merged(paths, "Direction")


def counter_collection(paths: list[Path]) -> list[dict]:
    """One row per (kernel, counter): value summed over dispatches, and the dispatch count.

    Each pass re-runs the application, so a kernel's dispatches appear once per pass; the counter
    values of a pass are summed over that pass's dispatches, and `dispatches` counts them.
    """
    totals: dict[tuple[str, str], list[float]] = {}
    for path in paths:
        for line, row in read_csv(path, ("Kernel_Name", "Counter_Name", "Counter_Value")):
            key = (row["Kernel_Name"], row["Counter_Name"])
            entry = totals.setdefault(key, [0.0, 0])
            entry[0] += number(path, line, row["Counter_Value"])
            entry[1] += 1
    return [{"kernel": k, "counter": c, "value": v, "dispatches": n} for (k, c), (v, n) in totals.items()]


def available_counters(list_output: str) -> set[str]:
    """Counter names from `rocprofv3 -L` / `rocprofv3 --list-avail` output."""
    names = set()
    for line in list_output.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Counter_Name" and value.strip():
            names.add(value.strip())
    return names
