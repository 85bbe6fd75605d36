"""rocprof-compute (rocprofiler-compute, formerly Omniperf) workloads: what `profile` writes into its
workload folder and what `analyze --save-dfs` writes beside it (profiling/tools/rocprof-compute.yaml
holds the layouts with their sources).

- pmc_perf.csv: one row per dispatch, every counter pass joined into it (Kernel_Name, Start_Timestamp,
  End_Timestamp: the passes' mean, so floats), counters as columns (`NAME_sum` beside per-instance
  `NAME[i]`, which are left out: the sum is the counter). Read into the kernel table (one duration
  per dispatch) and the counters, per kernel, weighted by dispatch duration like every other tool's.
- The speed-of-light table (2.1_Speed-of-Light.csv, 3.3.0: 2.1_System_Speed-of-Light.csv: Metric,
  Avg, Unit, Peak, Pct of Peak) and the memory chart (3.1_Memory_Chart.csv: Metric, Value), both of
  the whole workload (every dispatch analyze selected). They become the counters of one row,
  WORKLOAD_ROW, and the workload is placed under the roofline by the roofline's own rule
  (analysis.roofline.verdict_of) from the busiest compute pipe, HBM (L2-Fabric read + write) and L2,
  each in percent of the peak rocprof-compute computed for this GPU: a note says the verdict.
- sysinfo.csv: the GPU and host it ran on (a note, and the report's metadata for a bare folder).
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path
from typing import Any

from profilectl import data
from profilectl.errors import FormatError
from profilectl.formats.common import csv_header, number, read_csv
from profilectl.formats.reader import Reader
from profilectl.formats.tables import PER_DISPATCH, CounterValue, KernelStats, StatsByName, Tables

WORKLOAD_ROW = "all kernels (rocprof-compute analyze)"  # the counters row of the whole-workload tables
PCT = "Pct of Peak"


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprof-compute.yaml")


def _outputs() -> dict[str, Any]:
    return dict(tool_facts()["outputs"])


def is_pmc_perf(path: Path) -> bool:
    if path.name != _outputs()["counters"]:
        return False
    try:
        header = csv_header(path)
    except FormatError:
        return False
    return {"Kernel_Name", "Dispatch_ID"} <= set(header)


def table_kind(path: Path) -> str | None:
    """'speed_of_light' or 'memory_chart' for the analyze tables profilectl reads, else None."""
    outputs = _outputs()
    for kind in ("speed_of_light", "memory_chart"):
        if path.name in outputs[kind]:
            return kind
    return None


def _is_counter(column: str, metadata: set[str]) -> bool:
    """A hardware counter column: not a dispatch attribute, not one instance (NAME[i]) of a counter
    whose NAME_sum is there too, not a pass's duplicate of an attribute (Wave_Size_3, XCC_Index_5)."""
    if column in metadata or "[" in column:
        return False
    base, _, suffix = column.rpartition("_")
    return not (suffix.isdigit() and base in metadata)


def pmc_perf(path: Path) -> tuple[StatsByName, tuple[CounterValue, ...]]:
    """(kernel statistics, counters) of a pmc_perf.csv."""
    header = csv_header(path)
    metadata = set(_outputs()["metadata_columns"])
    counters = [c for c in header if _is_counter(c, metadata)]
    timed = {"Start_Timestamp", "End_Timestamp"} <= set(header)
    stats: StatsByName = {}
    values: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    for line, row in read_csv(path, header):  # every column: a cut-off row is one line, not a wrong number
        name = row["Kernel_Name"]
        duration = None
        if timed:
            duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
            if duration < 0:
                raise FormatError(f"{path}:{line}: End_Timestamp before Start_Timestamp")
            stats.setdefault(name, KernelStats()).add(duration)
        for column in counters:
            text = row.get(column)
            if text not in (None, ""):
                values.setdefault((name, column), []).append((number(path, line, text), duration))
    return stats, tuple(CounterValue.of(kernel, counter, items) for (kernel, counter), items in values.items())


def _cell(text: str | None) -> float | None:
    """A table cell as analyze writes it: a number, or empty / N/A / nan where the metric has none."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def metric_rows(path: Path, value_column: str) -> list[dict[str, str]]:
    try:
        with open(path, newline="", errors="replace") as fh:
            rows = list(csv.DictReader(fh))
            header = rows[0].keys() if rows else csv_header(path)
    except (OSError, csv.Error) as exc:
        raise FormatError(f"{path}: not a rocprof-compute analyze table ({exc})") from None
    missing = [c for c in ("Metric", value_column) if c not in header]
    if missing:
        raise FormatError(f"{path}: not a rocprof-compute analyze table: missing column(s) {', '.join(missing)}")
    return rows


def speed_of_light(path: Path) -> tuple[tuple[CounterValue, ...], dict[str, float]]:
    """The speed-of-light table as counters of WORKLOAD_ROW (each metric's value with its unit, and its
    percent of peak), and the utilisation of each roof (compute, hbm, l2) for the placement."""
    rows = metric_rows(path, "Avg")
    values: list[CounterValue] = []
    percent: dict[str, float] = {}
    for row in rows:
        metric = (row.get("Metric") or "").strip()
        if not metric:
            continue
        unit = (row.get("Unit") or "").strip()
        avg, pct = _cell(row.get("Avg")), _cell(row.get(PCT))
        if avg is not None:
            values.append(CounterValue.of(WORKLOAD_ROW, f"{metric} ({unit})" if unit else metric, [(avg, None)], unit))
        if pct is not None:
            values.append(CounterValue.of(WORKLOAD_ROW, f"{metric} (% of peak)", [(pct, None)], "percent"))
            percent[metric] = pct
    roofs = tool_facts()["speed_of_light"]
    utilisation: dict[str, float] = {}
    compute = [percent[m] for m in roofs["compute"] if m in percent]
    if compute:
        utilisation["compute"] = max(compute)
    hbm = [percent[m] for m in roofs["hbm"] if m in percent]
    if hbm:
        utilisation["hbm"] = sum(hbm)
    l2 = [percent[m] for m in roofs["l2"] if m in percent]
    if l2:
        utilisation["l2"] = max(l2)
    return tuple(values), utilisation


def memory_chart(path: Path) -> tuple[CounterValue, ...]:
    return tuple(CounterValue.of(WORKLOAD_ROW, f"memory chart: {metric}", [(value, None)])
                 for row in metric_rows(path, "Value")
                 if (metric := (row.get("Metric") or "").strip()) and (value := _cell(row.get("Value"))) is not None)


def placement(utilisation: dict[str, float]) -> str | None:
    """The whole workload under the roofline, by the roofline's one rule, as a sentence."""
    if "compute" not in utilisation or not ({"hbm", "l2"} & set(utilisation)):
        return None
    from profilectl.analysis.roofline import LEVELS, rules, verdict_of
    latency = float(rules().get("latency_percent", 60))
    verdict, bound_by = verdict_of(utilisation, LEVELS, latency)
    words = {"compute": "busiest compute pipe", "hbm": "HBM (L2-Fabric read + write)", "l2": "L2 cache"}
    figures = ", ".join(f"{words[k]} {v:.1f} %" for k, v in utilisation.items())
    return (f"rocprof-compute speed-of-light, {WORKLOAD_ROW}: {verdict}, carried by the {words[bound_by]} "
            f"({figures} of peak; under {latency:.0f} % on every roof is latency-bound)")


def system_info(path: Path) -> dict[str, str]:
    """sysinfo.csv's one row (gpu_model, gpu_arch, hostname, cu_per_gpu ...), {} where unreadable."""
    try:
        with open(path, newline="", errors="replace") as fh:
            row = next(csv.DictReader(fh), None)
    except (OSError, csv.Error):
        return {}
    return {k: v for k, v in (row or {}).items() if k and v}


def gpu_of(info: dict[str, str]) -> str | None:
    """'MI300X_A1 (gfx942)': the model and architecture sysinfo.csv names."""
    model, arch = info.get("gpu_model"), info.get("gpu_arch")
    if not arch:
        return None
    return f"{model} ({arch})" if model else arch


class RocprofComputeReader(Reader):
    kind = "rocprof-compute"

    def recognises(self, path: Path) -> bool:
        if path.name == _outputs()["system"]:
            return (path.parent / _outputs()["counters"]).is_file()
        return is_pmc_perf(path) or table_kind(path) is not None

    def read_file(self, path: Path) -> Tables:
        if path.name == _outputs()["system"]:
            info = system_info(path)
            gpu = gpu_of(info)
            where = f" on {info['hostname']}" if info.get("hostname") else ""
            return Tables(notes=(f"rocprof-compute workload {info.get('workload_name', path.parent.name)}: "
                                 f"{gpu or 'GPU unknown'}{where}",))
        kind = table_kind(path)
        if kind == "speed_of_light":
            values, utilisation = speed_of_light(path)
            verdict = placement(utilisation)
            return Tables(counters=values, notes=(verdict,) if verdict else ())
        if kind == "memory_chart":
            return Tables(counters=memory_chart(path))
        kernels, counters = pmc_perf(path)
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0, counters=counters,
                      kernel_timing="rocprof-compute pmc_perf.csv: each dispatch's start and end, the mean "
                                    "over its counter passes (the application ran once per pass)")
