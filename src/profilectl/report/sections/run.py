"""The run's story: its wall time, the backends passed over on this machine, what went wrong."""

from __future__ import annotations

from profilectl.model import units
from profilectl.model.document import Section
from profilectl.read.summary import Summary, machine_fallbacks


def build(summary: Summary) -> Section | None:
    run = summary.run
    if run is None:
        return None
    lines = [f"{run.reason}" + (f" (wall time {units.duration_s(run.wall_seconds)})"
                                if run.wall_seconds is not None else "")]
    shown, hidden = machine_fallbacks(run)
    lines += [f"fell back from {f.backend}: {f.reason}" for f in shown]
    if hidden:
        lines.append(f"not considered on this machine: {', '.join(hidden)}")
    if run.status != "ok" and run.message:
        lines.append(run.message)
    if summary.perfetto_trace:
        lines.append(f"Perfetto trace: {summary.perfetto_trace} in the run directory (open in ui.perfetto.dev)")
    return Section(key="run", title="Run", notes=tuple(lines))
