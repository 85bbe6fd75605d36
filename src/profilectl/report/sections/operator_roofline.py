"""Operators on the roofline from the trace's shapes (analysis/operator_roofline.py): one row per
operator and signature, the roofline chart of the roofline section (report/roofline_chart.py draws
it for HTML), findings for the heaviest operators, and the operators whose formula did not apply."""

from __future__ import annotations

from typing import Any

from profilectl.analysis import operator_roofline, roofline
from profilectl.analysis.operator_roofline import OperatorRoofline, OperatorRooflineResult
from profilectl.model.document import Chart, Column, Finding, Section, TableBlock
from profilectl.report.sections.roofline import result_of as counter_roofline

COLUMNS = (
    Column("operator", "Operator"),
    Column("signature", "Shapes (dtype)"),
    Column("kind", "Kind"),
    Column("share_percent", "% op GPU", "percent", "sum"),
    Column("total_ns", "GPU time", "ns", "sum"),
    Column("calls", "Calls", "count", "sum"),
    Column("launches", "Kernels", "count", "sum", "machine"),
    Column("ranks", "Ranks", "count", "none", "machine"),
    Column("cpu_ns", "CPU time", "ns", "sum", "machine"),
    Column("verdict", "Verdict"),
    Column("flop", "FLOP", "flop", "sum"),
    Column("bytes", "Min bytes", "bytes", "sum"),
    Column("flop_per_s", "Achieved", "flop_per_s"),
    Column("bytes_per_s", "Bytes/s", "bytes_per_s"),
    Column("intensity_hbm", "Intensity", "flop_per_byte"),
    Column("main_precision", "Roof"),
    Column("compute_percent", "Compute % of peak", "percent"),
    Column("hbm_percent", "HBM % (min)", "percent"),
    Column("roof_percent", "% of roof", "percent"),
    Column("kernel", "Heaviest kernel", show="machine"),
    Column("counter_flop_per_s", "Counters: achieved", "flop_per_s"),
    Column("counter_verdict", "Counters: verdict"),
    Column("source", "Formula source", show="machine"),
)
UNMODELLED = (Column("operator", "Operator"), Column("signature", "Shapes (dtype)"),
              Column("calls", "Calls", "count", "sum"), Column("total_ns", "GPU time", "ns", "sum"),
              Column("reason", "Why no FLOPs"))
TOP_FINDINGS = 5


def row(op: OperatorRoofline) -> tuple[Any, ...]:
    w = op.work
    values = {
        "operator": w.name, "signature": w.signature, "kind": w.kind, "share_percent": op.share_percent,
        "total_ns": w.gpu_ns, "calls": w.calls, "launches": w.launches, "ranks": w.ranks, "cpu_ns": w.cpu_ns,
        "verdict": op.verdict, "flop": w.flop, "bytes": w.bytes, "flop_per_s": op.flop_per_s,
        "bytes_per_s": op.bytes_per_s, "intensity_hbm": op.intensity,
        "main_precision": roofline.label(op.roof) if op.roof else None, "compute_percent": op.compute_percent,
        "hbm_percent": op.hbm_percent, "roof_percent": op.roof_percent,
        "kernel": w.kernels[0][0] if w.kernels else None, "counter_flop_per_s": op.counter_flop_per_s,
        "counter_verdict": op.counter_verdict, "source": w.source}
    return tuple(values[c.name] for c in COLUMNS)


def _finding(op: OperatorRoofline, result: OperatorRooflineResult) -> Finding:
    w = op.work
    by_name = {r.name: r for r in result.roofs}
    evidence = [f"{op.share_percent:.1f} % of the modelled operators' GPU time ({w.calls} calls, {w.launches} "
                f"kernels, {w.gpu_ns / 1e6:.3f} ms)",
                f"{w.flop:.4g} FLOP and at least {w.bytes:.4g} bytes from the shapes ({w.source})"]
    if op.flop_per_s is not None:
        roof = by_name.get(op.roof) if op.roof else None
        evidence.append(f"{roofline.rate_text(op.flop_per_s, 'flop_per_s')}" + (
            f" = {op.compute_percent:.0f} % of the {roof.label} peak {roofline.rate_text(roof.value, 'flop_per_s')}"
            if roof and op.compute_percent is not None else ""))
    if op.bytes_per_s is not None:
        hbm = by_name.get("hbm")
        evidence.append(f"{roofline.rate_text(op.bytes_per_s, 'bytes_per_s')} of compulsory traffic" + (
            f" = {op.hbm_percent:.0f} % of HBM {roofline.rate_text(hbm.value, 'bytes_per_s')} (a lower bound)"
            if hbm and op.hbm_percent is not None else ""))
    if op.intensity is not None:
        evidence.append(f"arithmetic intensity {op.intensity:.3g} FLOP per byte (an upper bound)")
    if op.counter_kernel is not None:
        evidence.append(f"counters (the reference) for {op.counter_kernel}: "
                        f"{roofline.rate_text(op.counter_flop_per_s or 0.0, 'flop_per_s')}, {op.counter_verdict}")
    words = {"memory-bound": "is memory-bound", "compute-bound": "is compute-bound",
             "latency-bound": "is under both roofs (latency, launch size or occupancy)",
             "unknown": "cannot be placed under a roof"}[op.verdict]
    best = f"{roofline.label(op.bound_by)} {op.roof_percent:.0f} % of peak" if op.bound_by and op.roof_percent \
        is not None else "no peak known for this GPU"
    steps = roofline.rules().get("next_steps") or {}
    step = steps.get(op.verdict) if op.verdict != "unknown" else (
        "name the GPU: report the run directory (its env.json says which GPU ran it), or add the GPU to "
        "profiling/peaks.yaml")
    return Finding(verdict=op.verdict, sentence=f"{w.name} {w.signature} {words}: {best}", evidence=tuple(evidence),
                   next_step=step,
                   scope=f"operator, {w.calls} calls on {w.ranks} rank(s); peaks: {result.peaks_source or 'none'}")


def result_of(summary: Any) -> OperatorRooflineResult | None:
    gpu = summary.metadata.gpu if getattr(summary, "metadata", None) else None
    return operator_roofline.analyse(summary.operator_shapes, gpu, counter_roofline(summary))


def build(summary: Any) -> Section | None:
    result = result_of(summary)
    if result is None or not (result.operators or result.unmodelled):
        return None
    rows = tuple(row(op) for op in result.operators)
    roofs = tuple((r.name, r.label, r.kind, r.value, r.unit, r.source) for r in result.roofs)
    notes = [f"FLOP and minimum bytes from each operator's input shapes and dtypes (profiling/{operator_roofline.FILE}, "
             "a source per formula); GPU time: the kernels each call launched, by correlation id; an operator "
             "inside another of the file is counted once, in the outermost",
             "minimum bytes: inputs read once, outputs written once: the HBM % is a lower bound and the intensity an "
             "upper bound; the counter-based roofline (profilectl counters --set roofline) is the reference",
             f"peaks: {result.peaks_source or 'none known'}" + (f" ({result.gpu})" if result.gpu else ""),
             *result.notes]
    if result.no_gpu:
        notes.append(f"{result.no_gpu} call(s) with a formula launched no kernel (CPU work, or a copy that is a "
                     "memcpy, not a kernel): not on the roofline")
    tables = [TableBlock("operator_roofline", COLUMNS, rows, title="Operators under the roofline (from shapes)",
                         shown=30)]
    if result.unmodelled:
        tables.append(TableBlock("operator_roofline_unmodelled", UNMODELLED, tuple(
            (w.name, w.signature, w.calls, w.gpu_ns, w.error) for w in result.unmodelled),
            title="Operators whose formula did not apply", shown=10))
    chart = Chart(kind="loglog_scatter", title="Operators on the roofline (FLOP/s against FLOP per minimum byte)",
                  table="operator_roofline", x="intensity_hbm", y="flop_per_s", size="total_ns", label="operator",
                  extra=(("roofs", roofs), ("verdict", "verdict")))
    return Section(key="operator_roofline", title="Operators on the roofline (from the trace's shapes)",
                   tables=tuple(tables), findings=tuple(_finding(op, result) for op in result.operators[:TOP_FINDINGS]),
                   notes=tuple(notes), charts=(chart,) if rows else ())
