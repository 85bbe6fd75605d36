"""rocprofv3 CSV output (<pid>_kernel_trace.csv, _counter_collection.csv, _hip_api_trace.csv, ...).

Columns by name: 6.2 kernel traces lack Stream_Id/Thread_Id, and the 6.2 counter collection has 15
columns instead of 19; only the columns read here are required.
"""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import KernelStats, kernel_rows, number, read_csv


def files(raw_dir: Path, kind: str) -> list[Path]:
    return sorted(raw_dir.rglob(f"*{kind}.csv"))


def kernel_trace(paths: list[Path]) -> list[dict]:
    stats: dict[str, KernelStats] = {}
    for path in paths:
        for line, row in read_csv(path, ("Kernel_Name", "Start_Timestamp", "End_Timestamp")):
            duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
            stats.setdefault(row["Kernel_Name"], KernelStats()).add(duration)
    return kernel_rows(stats)


def api_trace(paths: list[Path]) -> list[dict]:
    stats: dict[str, KernelStats] = {}
    for path in paths:
        for line, row in read_csv(path, ("Function", "Start_Timestamp", "End_Timestamp")):
            duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
            stats.setdefault(row["Function"], KernelStats()).add(duration)
    return kernel_rows(stats)


def memory_copies(paths: list[Path]) -> list[dict]:
    stats: dict[str, KernelStats] = {}
    for path in paths:
        for line, row in read_csv(path, ("Direction", "Start_Timestamp", "End_Timestamp")):
            duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
            stats.setdefault(row["Direction"], KernelStats()).add(duration)
    return kernel_rows(stats)


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
