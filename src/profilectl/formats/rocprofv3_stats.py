"""rocprofv3 `--stats` files: <pid>_kernel_stats.csv, _hip_api_stats.csv (6.2: _hip_stats.csv),
_hsa_api_stats.csv, _marker_api_stats.csv, _rccl_api_stats.csv, _memory_copy_stats.csv,
_domain_stats.csv ... with the columns Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,
StdDev in every release (rocprofiler-sdk generateCSV.cpp; StdDev is the sample deviation, n-1:
statistics.hpp get_variance).

A folder of stats files alone is a valid input. A stats file beside the trace it summarises is
left to the trace (the per-dispatch records are the better measurement; reading both would count
every kernel twice).
"""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import number, read_csv
from profilectl.formats.reader import Reader
from profilectl.model.tables import PRE_AGGREGATED, KernelStats, StatsByName, Tables

# stats kind -> (the trace kinds it summarises, the table it fills)
STATS = {
    "kernel_stats": (("kernel_trace",), "kernels"),
    "hip_api_stats": (("hip_api_trace", "hip_runtime_api_trace"), "api"),
    "hip_stats": (("hip_api_trace", "hip_runtime_api_trace"), "api"),  # 6.2's name
    "hsa_api_stats": (("hsa_api_trace",), "api"),
    "hsa_stats": (("hsa_api_trace",), "api"),  # 6.2's name
    "marker_api_stats": (("marker_api_trace",), "api"),
    "marker_stats": (("marker_api_trace",), "api"),  # 6.2's name
    "rccl_api_stats": (("rccl_api_trace",), "api"),
    "memory_copy_stats": (("memory_copy_trace",), "memory_copies"),
    "domain_stats": ((), "domains"),  # one row per domain: read as a note, not a table
}


def stats_kind(name: str) -> str | None:
    if not name.endswith(".csv"):
        return None
    stem = name[:-4]
    return next((kind for kind in STATS if stem == kind or stem.endswith(f"_{kind}")), None)


def read_stats(path: Path) -> StatsByName:
    stats: StatsByName = {}
    for line, row in read_csv(path, ("Name", "Calls", "TotalDurationNs")):
        calls = int(number(path, line, row["Calls"]))
        total = number(path, line, row["TotalDurationNs"])
        if row.get("MinNs") and row.get("MaxNs") and row.get("StdDev"):
            deviation = number(path, line, row["StdDev"])
            stats[row["Name"]] = KernelStats(calls=calls, total=total, mean=total / calls if calls else 0.0,
                                             m2=deviation * deviation * max(calls - 1, 0),
                                             minimum=number(path, line, row["MinNs"]),
                                             maximum=number(path, line, row["MaxNs"]))
        else:
            stats[row["Name"]] = KernelStats.totals_only(calls, total)
    return stats


class Rocprofv3StatsReader(Reader):
    kind = "rocprofv3-stats"

    def recognises(self, path: Path) -> bool:
        kind = stats_kind(path.name)
        if kind is None:
            return False
        prefix = path.name[: -len(f"{kind}.csv")]  # "<pid>_" or ""
        return not any((path.parent / f"{prefix}{trace}.csv").exists() for trace in STATS[kind][0])

    def read_file(self, path: Path) -> Tables:
        kind = stats_kind(path.name) or ""
        table = STATS[kind][1]
        if table == "domains":
            domains = read_stats(path)
            busiest = sorted(domains.items(), key=lambda item: -item[1].total)[:4]
            return Tables(notes=(f"{path.name}: " + ", ".join(f"{name} {s.calls} calls {s.total / 1e6:.3f} ms"
                                                             for name, s in busiest),))
        stats = read_stats(path)
        if table == "kernels":
            return Tables(kernels=stats, kernel_detail=PRE_AGGREGATED if stats else 0)
        return Tables(api=stats) if table == "api" else Tables(memory_copies=stats)
