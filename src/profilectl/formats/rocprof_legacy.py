"""Legacy rocprof (v1) results.csv / results.stats.csv and rocprofv2 results_<pid>.csv."""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import FormatError, KernelStats, csv_header, kernel_rows, number, read_csv

# Per-dispatch columns that are not counters.
_NON_COUNTER = {"Index", "KernelName", "Kernel_Name", "gpu-id", "queue-id", "queue-index", "pid", "tid",
                "grd", "wgr", "lds", "scr", "arch_vgpr", "accum_vgpr", "sgpr", "wave_size", "sig", "obj",
                "vgpr", "DispatchNs", "BeginNs", "EndNs", "CompleteNs", "Dispatch_ID", "GPU_ID",
                "Queue_ID", "Queue_Index", "PID", "TID", "Grid_Size", "Workgroup_Size", "LDS_Per_Workgroup",
                "Scratch_Per_Workitem", "Arch_VGPR", "Accum_VGPR", "SGPR", "Wave_Size", "Signal_Handle",
                "Kernel_Object", "Start_Timestamp", "End_Timestamp", "Correlation_ID"}


def results(path: Path) -> tuple[list[dict], list[dict]]:
    """(kernels, counters) from a v1 results.csv or v2 results_<pid>.csv."""
    header = csv_header(path)
    name_col = "KernelName" if "KernelName" in header else "Kernel_Name"
    if name_col not in header:
        raise FormatError(f"{path}: not a rocprof results file: no KernelName/Kernel_Name column")
    begin, end = (("BeginNs", "EndNs") if "BeginNs" in header else
                  ("Start_Timestamp", "End_Timestamp") if "Start_Timestamp" in header else (None, None))
    counter_cols = [c for c in header if c not in _NON_COUNTER]
    stats: dict[str, KernelStats] = {}
    totals: dict[tuple[str, str], list[float]] = {}
    for line, row in read_csv(path, [name_col]):
        name = row[name_col]
        if begin:
            stats.setdefault(name, KernelStats()).add(number(path, line, row[end]) - number(path, line, row[begin]))
        for col in counter_cols:
            if row.get(col) not in (None, ""):
                entry = totals.setdefault((name, col), [0.0, 0])
                entry[0] += number(path, line, row[col])
                entry[1] += 1
    counters = [{"kernel": k, "counter": c, "value": v, "dispatches": n} for (k, c), (v, n) in totals.items()]
    return kernel_rows(stats), counters


def stats_file(path: Path) -> list[dict]:
    """results.stats.csv: Name, Calls, TotalDurationNs, AverageNs, Percentage (already aggregated)."""
    rows = []
    for line, row in read_csv(path, ("Name", "Calls", "TotalDurationNs")):
        total = number(path, line, row["TotalDurationNs"])
        calls = int(number(path, line, row["Calls"]))
        rows.append({"name": row["Name"], "calls": calls, "total_ns": total,
                     "mean_ns": number(path, line, row["AverageNs"]) if row.get("AverageNs") else total / max(calls, 1),
                     "percent": number(path, line, row["Percentage"]) if row.get("Percentage") else None})
    return sorted(rows, key=lambda r: r["total_ns"], reverse=True)
