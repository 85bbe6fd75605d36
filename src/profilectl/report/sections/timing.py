"""Timed runs of the workload (profile): wall time statistics in seconds."""

from __future__ import annotations

from profilectl.model.document import Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import Summary


def build(summary: Summary) -> Section | None:
    timing = summary.timing
    if timing is None:
        return None
    table = table_of("timing", [timing], title=f"Timing ({timing.runs} runs)")
    return Section(key="timing", title="Timing", tables=(table,))
