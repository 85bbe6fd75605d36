"""What the run and the readers noted (files left out, sampling stopped, no timeline)."""

from __future__ import annotations

from profilectl.model.document import Section
from profilectl.read.summary import Summary


def build(summary: Summary) -> Section | None:
    notes = (summary.run.notes if summary.run else ()) + summary.notes
    return Section(key="notes", title="Notes", notes=tuple(dict.fromkeys(notes))) if notes else None
