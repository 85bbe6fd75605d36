"""The roofline section: per kernel, which roof limits it and how far below it runs, as one table
(every format), a per-precision table, the roofs with their sources, findings for the heaviest
kernels, and a log-log chart (report/roofline_chart.py draws it for HTML)."""

from __future__ import annotations

from typing import Any

from profilectl.analysis import roofline
from profilectl.analysis.roofline import KernelRoofline, RooflineResult
from profilectl.model.document import Chart, Column, Finding, Section, TableBlock

KERNEL_COLUMNS = (
    Column("kernel", "Kernel"),
    Column("share_percent", "% GPU", "percent", "sum"),
    Column("total_ns", "Time", "ns", "sum"),
    Column("calls", "Calls", "count", "sum"),
    Column("verdict", "Verdict"),
    Column("bound_by", "Roof"),
    Column("carrying", "Carried by"),
    Column("main_precision", "Main precision"),
    Column("flop", "FLOP", "flop", "sum"),
    Column("flop_per_s", "Achieved", "flop_per_s"),
    Column("intensity_hbm", "Intensity (HBM)", "flop_per_byte"),
    Column("intensity_l2", "Intensity (L2)", "flop_per_byte"),
    Column("hbm_bytes", "HBM bytes", "bytes", "sum"),
    Column("hbm_bytes_per_s", "HBM", "bytes_per_s"),
    Column("hbm_percent", "HBM % of peak", "percent"),
    Column("l2_bytes", "L2 bytes", "bytes", "sum"),
    Column("l2_bytes_per_s", "L2", "bytes_per_s"),
    Column("l2_percent", "L2 % of peak", "percent"),
    Column("lds_bytes_per_s", "LDS/shared", "bytes_per_s"),
    Column("compute_percent", "Compute % of peak", "percent"),
    Column("roof_percent", "% of roof", "percent"),
    Column("occupancy_percent", "Occupancy", "percent"),
    Column("waves", "Waves", "ratio"),
)
WORK_COLUMNS = (
    Column("kernel", "Kernel"),
    Column("precision", "Precision"),
    Column("operations", "Operations", "flop", "sum"),
    Column("rate", "Achieved", "flop_per_s"),
    Column("peak", "Peak", "flop_per_s"),
    Column("percent", "% of peak", "percent"),
)
ROOF_COLUMNS = (
    Column("roof", "Roof"),
    Column("kind", "Kind"),
    Column("peak_flop_per_s", "Peak (compute)", "flop_per_s"),
    Column("peak_bytes_per_s", "Peak (bandwidth)", "bytes_per_s"),
    Column("datasheet_flop_per_s", "Datasheet (compute)", "flop_per_s"),
    Column("datasheet_bytes_per_s", "Datasheet (bandwidth)", "bytes_per_s"),
    Column("source", "Source"),
)


def kernel_row(kernel: KernelRoofline) -> tuple[Any, ...]:
    values = {
        "kernel": kernel.kernel, "share_percent": kernel.share_percent, "total_ns": kernel.total_ns,
        "calls": kernel.calls, "verdict": kernel.verdict,
        "bound_by": roofline.label(kernel.bound_by) if kernel.bound_by else None, "carrying": kernel.carrying,
        "main_precision": roofline.label(kernel.main_precision) if kernel.main_precision else None,
        "flop": kernel.flop, "flop_per_s": kernel.flop_per_s, "intensity_hbm": kernel.intensity_hbm,
        "intensity_l2": kernel.intensity_l2, "hbm_bytes": kernel.bytes_at("hbm"),
        "hbm_bytes_per_s": kernel.rate_at("hbm"), "hbm_percent": kernel.percent_at("hbm"),
        "l2_bytes": kernel.bytes_at("l2"), "l2_bytes_per_s": kernel.rate_at("l2"), "l2_percent": kernel.percent_at("l2"),
        "lds_bytes_per_s": kernel.rate_at("lds"), "compute_percent": kernel.compute_percent,
        "roof_percent": kernel.roof_percent, "occupancy_percent": kernel.occupancy_percent, "waves": kernel.waves}
    return tuple(values[c.name] for c in KERNEL_COLUMNS)


def _work_rows(result: RooflineResult) -> tuple[tuple[Any, ...], ...]:
    rows = []
    for kernel in result.kernels:
        seconds = kernel.total_ns / 1e9 if kernel.total_ns else 0.0
        for precision, operations in kernel.work:
            roof = result.roof(precision)
            rate = operations / seconds if seconds else None
            rows.append((kernel.kernel, roofline.label(precision), operations, rate, roof.value if roof else None,
                         100.0 * rate / roof.value if roof and rate is not None and roof.value else None))
    return tuple(rows)


def _roof_rows(result: RooflineResult) -> tuple[tuple[Any, ...], ...]:
    rows = []
    for roof in result.roofs:
        bandwidth = roof.kind == "bandwidth"
        rows.append((roof.label, roof.kind, None if bandwidth else roof.value, roof.value if bandwidth else None,
                     None if bandwidth else roof.datasheet, roof.datasheet if bandwidth else None, roof.source))
    return tuple(rows)


def _finding(kernel: KernelRoofline, result: RooflineResult) -> Finding:
    steps = roofline.rules().get("next_steps") or {}
    evidence = [f"{kernel.share_percent:.1f} % of GPU time ({kernel.calls} launches, {kernel.total_ns / 1e6:.3f} ms)"]
    for precision, operations in kernel.work[:3]:
        seconds = kernel.total_ns / 1e9 if kernel.total_ns else 0.0
        achieved = roofline.rate_text(operations / seconds, "iop_per_s" if precision.endswith("int8") else
                                      "flop_per_s") if seconds else "-"
        evidence.append(f"{roofline.label(precision)}: {operations:.4g} operations, {achieved}")
    for level, bandwidth in kernel.bytes_per_s:
        percent = kernel.percent_at(level)
        evidence.append(f"{roofline.label(level)}: {roofline.rate_text(bandwidth, 'bytes_per_s')}"
                        + (f" = {percent:.0f} % of peak" if percent is not None else ""))
    if kernel.intensity_hbm is not None:
        evidence.append(f"arithmetic intensity {kernel.intensity_hbm:.3g} FLOP/byte at HBM"
                        + (f", {kernel.intensity_l2:.3g} at L2" if kernel.intensity_l2 is not None else ""))
    if kernel.roof_percent is not None:
        evidence.append(f"{kernel.roof_percent:.0f} % of the roof at this intensity")
    if kernel.verdict == "latency-bound" or kernel.occupancy_percent is not None:
        parts = []
        if kernel.occupancy_percent is not None:
            parts.append(f"achieved occupancy {kernel.occupancy_percent:.0f} %")
        if kernel.waves is not None:
            parts.append(f"{kernel.waves:.2f} waves")
        if parts:
            evidence.append(", ".join(parts))
    words = {"memory-bound": "is memory-bound", "compute-bound": "is compute-bound",
             "latency-bound": "is under both roofs (latency- or occupancy-limited)",
             "unknown": "cannot be placed under a roof"}[kernel.verdict]
    return Finding(verdict=kernel.verdict, sentence=f"{kernel.kernel} {words}: {kernel.carrying}",
                   evidence=tuple(evidence), next_step=steps.get(kernel.verdict),
                   scope=f"kernel, {kernel.calls} launches; peaks: {result.peaks_source or 'none'}")


def result_of(summary: Any) -> RooflineResult | None:
    """The summary's roofline, recomputed with the GPU's datasheet peaks when the report knows the GPU."""
    if getattr(summary, "metadata", None) is not None and summary.metadata.gpu and summary.counters_by_kernel:
        fresh = roofline.analyse(summary)
        if fresh is not None:
            return fresh
    stored: RooflineResult | None = getattr(summary, "roofline", None)
    return stored


def roofline_section(summary: Any) -> Section | None:
    result = result_of(summary)
    if result is None or not result.kernels:
        return None
    rows = tuple(kernel_row(k) for k in result.kernels)
    top = int(roofline.rules().get("top_findings", 10))
    findings = tuple(_finding(k, result) for k in result.kernels[:top])
    roofs = tuple((r.name, r.label, r.kind, r.value, r.unit, r.source) for r in result.roofs)
    shares = roofline.share_by_verdict(result)
    notes = [f"peaks: {result.peaks_source or 'none known'}" + (f" ({result.gpu})" if result.gpu else ""),
             "verdicts: " + ", ".join(f"{verdict} {share:.0f} % of GPU time" for verdict, share in
                                      sorted(shares.items(), key=lambda item: -item[1])),
             f"under both roofs: below {result.latency_percent:.0f} % of every roof (Nsight Compute's latency "
             "line); % of roof = achieved over min(compute peak, intensity x HBM peak)", *result.notes]
    chart = Chart(kind="loglog_scatter", title="Roofline (FLOP/s against FLOP per HBM byte)", table="roofline",
                  x="intensity_hbm", y="flop_per_s", size="total_ns", label="kernel",
                  extra=(("roofs", roofs), ("verdict", "verdict")))
    return Section(key="roofline", title="Roofline: what limits each kernel",
                   tables=(TableBlock("roofline", KERNEL_COLUMNS, rows, title="Kernels under the roofline",
                                      shown=30),
                           TableBlock("roofline_work", WORK_COLUMNS, _work_rows(result),
                                      title="Work by precision and pipe", shown=30),
                           TableBlock("roofline_roofs", ROOF_COLUMNS, _roof_rows(result), title="Roofs")),
                   findings=findings, notes=tuple(notes), charts=(chart,))


def compare_section(before: Any, after: Any) -> Section | None:
    """compare: each kernel's movement under the roofline between two runs (commands.compare adds it)."""
    moves = roofline.compare(result_of(before), result_of(after))
    if not moves:
        return None
    columns = (Column("kernel", "Kernel"), Column("verdict_before", "Verdict A"), Column("verdict_after", "Verdict B"),
               Column("flop_per_s_before", "FLOP/s A", "flop_per_s"), Column("flop_per_s_after", "FLOP/s B", "flop_per_s"),
               Column("intensity_before", "Intensity A", "flop_per_byte"),
               Column("intensity_after", "Intensity B", "flop_per_byte"),
               Column("roof_percent_before", "% of roof A", "percent"), Column("roof_percent_after", "% of roof B", "percent"),
               Column("total_ns_before", "Time A", "ns", "sum"), Column("total_ns_after", "Time B", "ns", "sum"),
               Column("moved", "Moved"), Column("sentence", "Movement"))
    rows = tuple(tuple(getattr(m, c.name) for c in columns) for m in moves)
    findings = tuple(Finding(verdict="roofline-moved", sentence=f"{m.kernel}: {m.sentence}", scope="kernel")
                     for m in moves if m.moved)
    return Section(key="roofline_compare", title="Roofline movement between the runs",
                   tables=(TableBlock("roofline_compare", columns, rows),), findings=findings)


build = roofline_section

__all__ = ["build", "roofline_section", "compare_section", "kernel_row", "KERNEL_COLUMNS"]
