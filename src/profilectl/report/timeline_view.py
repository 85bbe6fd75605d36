"""The timeline analysis (analysis/timeline.py) as words, tables and charts, for every report format:
the same lines and rows in the terminal, Markdown and HTML."""

from __future__ import annotations

import statistics

from html import escape
from typing import Sequence

from profilectl.analysis.timeline import BusyCurve, StepRow, TimelineAnalysis, TimelineRow
from profilectl.report.units import duration_ns as duration, shorten


def lines(analysis: TimelineAnalysis) -> list[str]:
    """What the timeline says, one finding per line (the merged row: all ranks together)."""
    row = analysis.merged
    out = [_busy_line(row)]
    if row.max_concurrency > 1:
        out.append(f"concurrency: {duration(row.concurrent_ns)} with two or more GPU activities at once "
                   f"({100.0 * row.concurrent_ns / row.busy_ns if row.busy_ns else 0:.1f} % of busy time; at most "
                   f"{row.max_concurrency} at once over {row.streams} streams/queues)")
    if row.communication_ns:
        out.append(f"communication (NCCL/RCCL): {duration(row.communication_ns)}, "
                   f"{row.hidden_communication_percent or 0:.1f} % of it hidden under compute "
                   f"({duration(row.communication_ns - row.hidden_communication_ns)} exposed)")
    launch = row.launch
    parts = [f"{launch.short_kernel_percent:.1f} % of kernel time in {launch.short_kernels:,} kernels shorter than "
             + ("their launch call" if launch.short_kernel_basis == "launch call" else "5 µs (no launch calls linked)")]
    if launch.launch_call_ns:
        kernel_time = row.compute_ns + row.communication_ns
        parts.append(f"launch calls {duration(launch.launch_call_ns)} on the CPU against {duration(kernel_time)} of "
                     "kernels")
    if launch.queue_depth_mean is not None:
        parts.append(f"queue depth {launch.queue_depth_mean:.1f} on average (max {launch.queue_depth_max})")
    if launch.launch_delay_mean_ns is not None:
        parts.append(f"launch call's end to kernel start {duration(launch.launch_delay_mean_ns)} on average")
    out.append("launches: " + "; ".join(parts))
    out.append(f"verdict: {row.verdict}")
    for gap in analysis.gaps[:3]:
        rank = f"rank {gap.rank}, " if analysis.ranks else ""
        out.append(f"idle gap of {duration(gap.duration_ns)} at +{duration(gap.start_ns)} ({rank}after "
                   f"{_short(gap.after)}, before {_short(gap.before)})")
    if analysis.steps:
        slow = ", ".join(f"#{n}" for n in analysis.slowest_steps)
        warm = sum(s.warmup for s in analysis.steps)
        steady = [s.wall_ns for s in analysis.steps if s.steady] or [s.wall_ns for s in analysis.steps]
        median = statistics.median(steady) if steady else 0
        out.append(f"steps ({analysis.step_source}): {len(analysis.steps)}, median {duration(median)}"
                   + (f"; slowest {slow}" if slow else "") + (f"; first {warm} shown apart as warm-up" if warm else "")
                   + ("; the last one apart (it may run until the profiler stopped)" if analysis.steps[-1].last else ""))
    out += list(analysis.notes)
    return out


def _busy_line(row: TimelineRow) -> str:
    gaps = (f"{row.gaps:,} idle gap(s) of 10 µs or more, {duration(row.gap_total_ns)} in all, the largest "
            f"{duration(row.largest_gap_ns)}") if row.gaps else "no idle gap of 10 µs or more"
    return (f"GPU busy {row.busy_percent:.1f} % of {duration(row.span_ns)} (idle {duration(row.idle_ns)}; {gaps})")


def _short(name: str, width: int = 60) -> str:
    return shorten(name, width)


RANK_HEADER = ("rank", "host", "busy", "idle", "gaps", "largest gap", "comm hidden", "short kernels", "queue depth")
STEP_HEADER = ("step", "wall", "GPU busy", "busy %", "comm %", "top kernel", "")


def rank_rows(analysis: TimelineAnalysis) -> list[tuple[str, ...]]:
    return [(r.rank, r.host or "-", f"{r.busy_percent:.1f} %", duration(r.idle_ns), f"{r.gaps:,}",
             duration(r.largest_gap_ns),
             f"{r.hidden_communication_percent:.1f} %" if r.hidden_communication_percent is not None else "-",
             f"{r.launch.short_kernel_percent:.1f} %",
             f"{r.launch.queue_depth_mean:.1f}" if r.launch.queue_depth_mean is not None else "-")
            for r in analysis.ranks]


def step_rows(analysis: TimelineAnalysis, limit: int = 50) -> list[tuple[str, ...]]:
    slow = set(analysis.slowest_steps)
    return [(str(s.step), duration(s.wall_ns), duration(s.gpu_busy_ns), f"{s.busy_percent:.1f}",
             f"{s.communication_percent:.1f}", _short(s.top_kernel or "-", 50),
             "warm-up" if s.warmup else "last" if s.last else ("slowest" if s.step in slow else ""))
            for s in analysis.steps[:limit]]


# ---------------------------------------------------------------- HTML charts (inline SVG)
def busy_chart(curves: Sequence[BusyCurve], width: int = 900, lane: int = 26) -> str:
    """GPU busy over time, one lane per rank: each bucket's shade is its busy share."""
    if not curves:
        return ""
    parts = []
    for index, curve in enumerate(curves):
        y = index * lane
        step = width / max(1, len(curve.busy))
        parts.append(f'<text x="0" y="{y + lane * 0.65:.0f}" font-size="11">rank {escape(curve.rank)}</text>')
        for i, busy in enumerate(curve.busy):
            if busy > 0:
                parts.append(f'<rect class="busy" x="{80 + i * step:.1f}" y="{y + 3}" width="{step + 0.3:.1f}" '
                             f'height="{lane - 6}" fill="#3366cc" fill-opacity="{max(0.08, busy):.2f}">'
                             f'<title>{busy * 100:.0f} % busy</title></rect>')
    total = curves[0].bucket_ns * len(curves[0].busy)
    height = lane * len(curves) + 16
    parts.append(f'<text x="80" y="{height - 2}" font-size="10">0</text>'
                 f'<text x="{80 + width:.0f}" y="{height - 2}" font-size="10" text-anchor="end">{duration(total)}</text>')
    return (f'<svg role="img" aria-label="GPU busy over time" class="timeline-chart" width="{width + 90}" '
            f'height="{height}">{"".join(parts)}</svg>')


def steps_chart(steps: Sequence[StepRow], width: int = 900, height: int = 160) -> str:
    """Per step: wall time (outline) and GPU busy time (filled), warm-up steps greyed."""
    if not steps:
        return ""
    longest = max(s.wall_ns for s in steps) or 1
    bar = width / len(steps)
    parts = []
    for i, s in enumerate(steps):
        x = i * bar
        wall_h = height * s.wall_ns / longest
        busy_h = height * s.gpu_busy_ns / longest
        colour = "#999999" if s.warmup else "#109618"
        parts.append(f'<rect class="step" x="{x + 1:.1f}" y="{height - wall_h:.1f}" width="{max(1.0, bar - 2):.1f}" '
                     f'height="{wall_h:.1f}" fill="none" stroke="{colour}"><title>step {s.step}: '
                     f'{duration(s.wall_ns)}, GPU busy {duration(s.gpu_busy_ns)}</title></rect>')
        parts.append(f'<rect x="{x + 1:.1f}" y="{height - busy_h:.1f}" width="{max(1.0, bar - 2):.1f}" '
                     f'height="{busy_h:.1f}" fill="{colour}" fill-opacity="0.6"/>')
    return (f'<svg role="img" aria-label="time per step" class="steps-chart" width="{width}" height="{height}">'
            f'{"".join(parts)}</svg>')


def html(analysis: TimelineAnalysis) -> str:
    from profilectl.report.html import text_table as table
    parts = ["<h2>Timeline</h2>", "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in lines(analysis)) + "</ul>",
             busy_chart(analysis.curves)]
    if analysis.ranks:
        parts += ["<h3>Per rank</h3>", table(RANK_HEADER, rank_rows(analysis))]
    if analysis.steps:
        parts += ["<h3>Steps</h3>", steps_chart(analysis.steps), table(STEP_HEADER, step_rows(analysis))]
    return "\n".join(parts)


def markdown(analysis: TimelineAnalysis) -> list[str]:
    from profilectl.report.export import md_table
    out = ["## Timeline", ""] + [f"- {line}" for line in lines(analysis)] + [""]
    if analysis.ranks:
        out += ["### Per rank", ""] + md_table(RANK_HEADER, rank_rows(analysis))
    if analysis.steps:
        out += ["### Steps", ""] + md_table(STEP_HEADER, step_rows(analysis))
    return out


def terminal(analysis: TimelineAnalysis) -> list[object]:
    """rich renderables: the findings, then the per-rank and per-step tables."""
    from rich.table import Table
    from rich.text import Text
    out: list[object] = [Text("Timeline", style="bold")]
    out += [Text(f"  {line}") for line in lines(analysis)]
    for title, header, rows in (("Timeline per rank", RANK_HEADER, rank_rows(analysis)),
                                ("Steps", STEP_HEADER, step_rows(analysis, 30))):
        if rows:
            table = Table(title=title, title_justify="left")
            for column in header:
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(*row)
            out.append(table)
    return out
