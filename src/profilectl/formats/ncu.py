"""Nsight Compute `--csv` output: one row per (kernel launch, metric), "==PROF==" lines interleaved."""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import number, read_csv


def additive(metric: str, unit: str) -> bool:
    """Counts and byte/cycle/time totals add up over launches; rates, percentages and averages don't."""
    if unit in ("%",) or "/" in unit:
        return False
    return metric.endswith((".sum", ".max", ".min")) or "." not in metric


def metrics(path: Path) -> list[dict]:
    """One row per (kernel, metric): summed over launches for additive metrics (counts, bytes,
    durations), averaged for the rest (.pct, .ratio, .avg, per-second rates); launches counted."""
    totals: dict[tuple[str, str], list] = {}
    for line, row in read_csv(path, ("Kernel Name", "Metric Name", "Metric Value"), skip_prefix="=="):
        value_text = row["Metric Value"]
        if value_text in ("", "n/a"):
            continue
        key = (row["Kernel Name"], row["Metric Name"])
        entry = totals.setdefault(key, [0.0, 0, row.get("Metric Unit", "")])
        entry[0] += number(path, line, value_text)
        entry[1] += 1
    return [{"kernel": k, "counter": m, "value": v if additive(m, u) else v / n, "dispatches": n, "unit": u}
            for (k, m), (v, n, u) in totals.items()]


DURATION_METRIC = "gpu__time_duration.sum"
_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}


def kernels(metric_rows: list[dict]) -> list[dict]:
    """A kernels table from the gpu__time_duration.sum metric, when it was collected."""
    rows = [r for r in metric_rows if r["counter"] == DURATION_METRIC]
    total = sum(r["value"] * _TO_NS.get(r.get("unit", "ns"), 1.0) for r in rows) or 1.0
    out = []
    for r in rows:
        ns = r["value"] * _TO_NS.get(r.get("unit", "ns"), 1.0)
        out.append({"name": r["kernel"], "calls": r["dispatches"], "total_ns": ns,
                    "mean_ns": ns / max(r["dispatches"], 1), "percent": 100.0 * ns / total})
    return sorted(out, key=lambda k: k["total_ns"], reverse=True)


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
