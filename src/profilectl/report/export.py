"""Summaries and comparisons as JSON, CSV or Markdown text (HTML is html.py, terminal render.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Any, Iterable, Sequence

from profilectl.report.compare import Comparison
from profilectl.report.summary import (RANK_COLUMNS, SECTIONS, KernelRow, Summary, aggregation_legend, imbalance_line,
                                       job_line, step_time_line)

KERNEL_COLUMNS = ("name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "percent")


def row_columns(rows: Sequence[KernelRow]) -> tuple[str, ...]:
    """KERNEL_COLUMNS, with self_ns after total_ns where the rows know it (torch operators)."""
    if any(r.self_ns is not None for r in rows):
        return KERNEL_COLUMNS[:3] + ("self_ns",) + KERNEL_COLUMNS[3:]
    return KERNEL_COLUMNS


def json_text(payload: dict[str, Any]) -> str:
    """Readable and fast: one line per top-level key, one line per table row (each row encoded by
    the C encoder; json's indent= would force the pure-Python one, ~0.15 s for 3,000 kernels)."""
    def dump(value: Any) -> str:
        return json.dumps(value, default=str, ensure_ascii=False)

    lines = []
    for key, value in payload.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = ",\n    ".join(dump(v) for v in value)
            lines.append(f"  {dump(key)}: [\n    {rows}\n  ]")
        else:
            lines.append(f"  {dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def to_json(summary: Summary) -> str:
    return json_text(summary.to_dict())


def to_csv(summary: Summary) -> str:
    """The kernels table (every kernel), one row each: the table people put in spreadsheets."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=KERNEL_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(dataclasses.asdict(k) for k in summary.kernels)
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value).replace("|", "\\|")


def md_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The one Markdown table writer: header, rule, escaped cells."""
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def to_markdown(summary: Summary, top: int = 10) -> str:
    lines = []
    run = summary.run
    if run:
        lines += [f"# {run.service} via {run.backend} — {run.status}", "", run.reason, ""]
        lines += [f"- fell back from **{f.backend}**: {f.reason}" for f in run.fallbacks]
        lines.append("")
    elif summary.job:
        lines += [f"# SLURM job {summary.job.job_id}.{summary.job.step_id} — {summary.job.status}", "",
                  job_line(summary) or "", ""]
    else:
        lines += [f"# {summary.source.kind}: {summary.source.path}", ""]
    if summary.kernel_timing:
        lines += [f"Kernel times measured by {summary.kernel_timing}: longer than the same kernels in a trace.", ""]
    timing = summary.timing
    if timing:
        lines += ["## Timing", ""] + md_table(
            ("runs", "mean s", "median s", "p95 s", "min s", "max s", "std s"),
            [(timing.runs, *(f"{getattr(timing, k + '_s'):.4f}" for k in ("mean", "median", "p95", "min", "max", "std")))])
    if (steps := step_time_line(summary)):
        lines += [f"- {steps}", ""]
    for key, title in SECTIONS:
        rows: tuple[KernelRow, ...] = getattr(summary, key)
        if rows:
            shown = row_columns(rows)
            lines += [f"## {title}", ""] + md_table(shown, ([getattr(r, c) for c in shown] for r in rows[:top]))
    if summary.counters_by_kernel:
        columns = list(dict.fromkeys(k for r in summary.counters_by_kernel for k in r))
        lines += ["## Counters per kernel", ""] + md_table(columns, ([r.get(c) for c in columns]
                                                                     for r in summary.counters_by_kernel[:top]))
        lines[-1:-1] = [f"- {line}" for line in aggregation_legend(summary)]
    if summary.hotspots:
        lines += ["## PC sampling hotspots", ""] + md_table(
            ("kernel", "instruction", "source", "samples", "%"),
            ((h.kernel, h.instruction, h.source, h.samples, f"{h.percent:.1f}") for h in summary.hotspots[:top]))
    if summary.stall_reasons:
        lines += ["## Stall reasons", ""] + md_table(("reason", "samples", "%"), (
            (s.reason, s.samples, f"{s.percent:.1f}") for s in summary.stall_reasons))
    if summary.ranks:
        lines += ["## Per rank", ""] + md_table(RANK_COLUMNS, ([getattr(r, c) for c in RANK_COLUMNS]
                                                               for r in summary.ranks))
        line = imbalance_line(summary)
        if line:
            lines[-1:-1] = [f"- {line}"]
    return "\n".join(lines)


def _speedup(value: float | None) -> str:
    return f"{value:.2f}×" if value else "-"


def comparison_markdown(result: Comparison, top: int = 15) -> str:
    lines = [f"# {result.a} vs {result.b}", "",
             f"GPU time {result.gpu_time_ns_a:.0f} ns → {result.gpu_time_ns_b:.0f} ns, speedup {_speedup(result.speedup)}",
             ""] + ([f"> warning: {result.warning}", ""] if result.warning else [])
    lines += md_table(("kernel", "calls A", "calls B", "total A ns", "total B ns", "speedup"),
                      ((r.name, r.calls_a, r.calls_b, f"{r.total_ns_a:.0f}", f"{r.total_ns_b:.0f}", _speedup(r.speedup))
                       for r in result.kernels[:top]))
    if result.ranks:
        lines += ["## Per rank", ""] + md_table(("rank", "GPU time A ns", "GPU time B ns", "speedup"), (
            (d.rank, f"{d.total_ns_a:.0f}", f"{d.total_ns_b:.0f}", _speedup(d.speedup)) for d in result.ranks))
    for label, only in (("Only in A", result.only_in_a), ("Only in B", result.only_in_b)):
        if only:
            lines += [f"## {label}", ""] + [f"- {r.name} ({r.calls} calls, {r.total_ns:.0f} ns)" for r in only[:top]]
            lines.append("")
    return "\n".join(lines)
