"""The timeline analysis (analysis/timeline.py): what it says in lines, the per-rank table, the
steps, the largest idle gaps, and the GPU busy over time."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from profilectl.model.timeline import TimelineAnalysis, TimelineRow
from profilectl.model.document import Chart, Column, Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import Summary
from profilectl.model.units import duration_ns as duration, shorten

RANK_TITLES = {"rank": "rank", "host": "host", "busy_percent": "busy", "idle_ns": "idle", "gaps": "gaps",
               "largest_gap_ns": "largest gap", "hidden_communication_percent": "comm hidden",
               "launch_short_kernel_percent": "short kernels", "launch_queue_depth_mean": "queue depth"}
STEP_TITLES = {"step": "step", "wall_ns": "wall", "gpu_busy_ns": "GPU busy", "busy_percent": "busy %",
               "communication_percent": "comm %", "top_kernel": "top kernel"}
STEPS_SHOWN = 50


def build(summary: Summary) -> Section | None:
    analysis = summary.timeline
    if analysis is None:
        return None
    rows = [flat(r) for r in (*analysis.ranks, analysis.merged)] if analysis.ranks else [flat(analysis.merged)]
    # people see the per-rank table when there are ranks; one process's row is what the lines say
    tables = [table_of("timeline", rows, RANK_TITLES, title="Timeline per rank",
                       shown=len(rows) if analysis.ranks else 0)]
    charts = [Chart(kind="busy_timeline", title="GPU busy over time", table="timeline",
                    extra=(("curves", tuple((c.rank, c.start_ns, c.bucket_ns, c.busy) for c in analysis.curves)),))]
    if analysis.steps:
        slow = set(analysis.slowest_steps)
        steps = table_of("steps", analysis.steps, STEP_TITLES, title="Steps", shown=STEPS_SHOWN)
        marks = tuple("warm-up" if s.warmup else "last" if s.last else ("slowest" if s.step in slow else "")
                      for s in analysis.steps)
        steps = dataclasses.replace(steps, columns=steps.columns + (Column("mark", "", show="human"),),
                                    rows=tuple(row + (mark,) for row, mark in zip(steps.rows, marks)))
        tables.append(steps)
        charts.append(Chart(kind="steps", title="Time per step", table="steps", x="wall_ns", y="gpu_busy_ns",
                            extra=(("grey", "warmup"),)))
    if analysis.gaps:
        tables.append(table_of("idle_gaps", analysis.gaps, title="Largest idle gaps", shown=0))
    # the verdict is the diagnosis' top finding (summary._with_verdicts): said there, once
    said = bool(summary.diagnosis and summary.diagnosis.findings)
    return Section(key="timeline", title="Timeline", notes=tuple(lines(analysis, verdict=not said)), tables=tuple(tables),
                   charts=tuple(charts))


def flat(row: TimelineRow) -> dict[str, Any]:
    """A timeline row with its launch statistics inline (launch_*), as CSV and SQL want it."""
    values = dataclasses.asdict(row)
    launch = values.pop("launch", None) or {}
    return {**values, **{f"launch_{k}" if not k.startswith("launch") else k: v for k, v in launch.items()}}


def lines(analysis: TimelineAnalysis, verdict: bool = True) -> list[str]:
    """What the timeline says, one finding per line (the merged row: all ranks together); `verdict`:
    its one-line verdict too (left out where the diagnosis says it)."""
    row = analysis.merged
    out = [_busy_line(row, analysis)]
    if row.max_concurrency > 1:
        out.append(f"concurrency: {duration(row.concurrent_ns)} with two or more GPU activities at once "
                   f"({100.0 * row.concurrent_ns / row.busy_ns if row.busy_ns else 0:.1f} % of busy time; at most "
                   f"{row.max_concurrency} at once over {row.streams} streams/queues)")
    if row.communication_ns:
        out.append(f"communication (NCCL/RCCL): {duration(row.communication_ns)}, "
                   f"{row.hidden_communication_percent or 0:.1f} % of it hidden under compute "
                   f"({duration(row.communication_ns - row.hidden_communication_ns)} exposed)")
    launch = row.launch
    parts = [f"{launch.short_kernel_percent:.1f} % of kernel time in {launch.short_kernels} kernels shorter than "
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
    if verdict:
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


def _busy_line(row: TimelineRow, analysis: TimelineAnalysis) -> str:
    gaps = (f"{row.gaps} idle gap(s) of 10 µs or more, {duration(row.gap_total_ns)} in all, the largest "
            f"{duration(row.largest_gap_ns)}") if row.gaps else "no idle gap of 10 µs or more"
    spread = analysis.ranks_busy
    if spread is not None:  # a job: each rank on its own span first, the union under its own name
        return (f"GPU busy {spread.mean_percent:.1f} % on average over {spread.ranks} ranks (ranks "
                f"{spread.min_percent:.1f}-{spread.max_percent:.1f} %, each over its first to last GPU activity); "
                f"any GPU busy {row.busy_percent:.1f} % of the job's {duration(row.span_ns)} ({gaps} with no GPU busy)")
    return (f"GPU busy {row.busy_percent:.1f} % of {duration(row.span_ns)}, first to last GPU activity (idle "
            f"{duration(row.idle_ns)}; {gaps})")


def _short(name: str, width: int = 60) -> str:
    return shorten(name, width)
