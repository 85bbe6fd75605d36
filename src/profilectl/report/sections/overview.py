"""What was measured, in a line or two: the SLURM job, the totals, how kernel times were measured."""

from __future__ import annotations

from profilectl.model import units
from profilectl.model.document import Section
from profilectl.read.summary import Summary, job_line


def build(summary: Summary) -> Section | None:
    lines = []
    if (job := job_line(summary)):
        lines.append(job)
    totals = summary.totals
    if totals.dispatches or totals.copies:
        copies = (f" (kernels {units.duration_ns(totals.kernel_time_ns)}, {totals.copies:,} copies and memsets "
                  f"{units.duration_ns(totals.copy_time_ns)})") if totals.copies else ""
        lines.append(f"{totals.dispatches:,} dispatches of {totals.kernels:,} kernels, "
                     f"{units.duration_ns(totals.gpu_time_ns)} of GPU time{copies}")
    if summary.kernel_timing:
        lines.append(f"kernel times measured by {summary.kernel_timing}: longer than the same kernels in a trace")
    return Section(key="overview", title="Overview", notes=tuple(lines)) if lines else None
