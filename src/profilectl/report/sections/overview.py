"""Where the time goes, in one line, for every report (GPU runs, CPU-only traces, timed runs): the
document's headline, which every format says first; and the overview beside it: the SLURM job and
how kernel times were measured."""

from __future__ import annotations

from profilectl.model import units
from profilectl.model.document import Section
from profilectl.read.summary import KernelRow, Summary, job_line

NAMED = 3  # the heaviest operators the line names


def build(summary: Summary) -> Section | None:
    lines = []
    if (job := job_line(summary)):
        lines.append(job)
    if summary.kernel_timing:
        lines.append(f"kernel times measured by {summary.kernel_timing}: longer than the same kernels in a trace")
    return Section(key="overview", title="Overview", notes=tuple(lines)) if lines else None


def where_time_goes(summary: Summary) -> str | None:
    """One line: the GPU time and its parts where there is GPU activity, else the operators' CPU self
    time; the timed runs' median wall time before either where the run was timed."""
    parts = []
    timing = summary.timing
    if timing is not None:
        parts.append(f"wall time per run {units.duration_s(timing.median_s)} (median of {timing.runs}; "
                     f"min {units.duration_s(timing.min_s)}, max {units.duration_s(timing.max_s)})")
    totals = summary.totals
    if totals.gpu_time_ns > 0:
        parts.append(_gpu_part(summary))
    elif summary.operators:
        parts.append(_operators_part(summary.operators))
    if summary.step_time is not None:
        parts.append(f"steady-state step {units.duration_s(summary.step_time.median_s)} (median)")
    return "; ".join(parts) or None


def _count(count: int, one: str, many: str | None = None) -> str:
    return f"{units.number(count)} {one if count == 1 else many or one + 's'}"


def _share(part: float, whole: float) -> str:
    return units.percent(100.0 * part / whole if whole else 0.0)


def _gpu_part(summary: Summary) -> str:
    totals = summary.totals
    gpu = totals.gpu_time_ns
    # the whole trace, start-up included: the diagnosis beside it judges the steady state, so say which
    text = f"GPU time {units.duration_ns(gpu)} in the whole trace: kernels {_share(totals.kernel_time_ns, gpu)}"
    if summary.kernels:
        top = summary.kernels[0]
        text += (f" ({_count(totals.dispatches, 'dispatch', 'dispatches')} of {_count(totals.kernels, 'kernel')}; "
                 f"heaviest {units.shorten(top.name, 60)}, {_share(top.total_ns, gpu)})")
    if totals.copies:
        text += f", copies and memsets {_share(totals.copy_time_ns, gpu)}"
    return text


def _operators_part(rows: tuple[KernelRow, ...]) -> str:
    if any(r.self_ns is None for r in rows):  # no nesting (XLA's ops): their totals add up
        whole = sum(r.total_ns for r in rows)
        named = ", ".join(f"{units.shorten(r.name, 40)} {_share(r.total_ns, whole)}" for r in rows[:NAMED])
        return f"time in operators {units.duration_ns(whole)}: {named}"
    whole = sum(r.self_ns or 0.0 for r in rows)
    named = ", ".join(f"{units.shorten(r.name, 40)} {units.percent(r.percent)}" for r in rows[:NAMED])
    return (f"no GPU activity recorded (a CPU-only run, or a profile of the CPU only); CPU time in operators "
            f"{units.duration_ns(whole)} (self time): {named}")
