"""What the run and the readers noted (files left out, sampling stopped, no timeline), each once,
and none that the headline already says."""

from __future__ import annotations

from profilectl.formats.torch_trace import NO_GPU_ACTIVITY
from profilectl.model.document import Section
from profilectl.read.summary import Summary


def build(summary: Summary) -> Section | None:
    notes = (summary.run.notes if summary.run else ()) + summary.notes
    if summary.totals.gpu_time_ns == 0 and summary.operators:  # "no GPU activity recorded" heads the report
        notes = tuple(n for n in notes if NO_GPU_ACTIVITY not in n)
    return Section(key="notes", title="Notes", notes=tuple(dict.fromkeys(notes))) if notes else None
