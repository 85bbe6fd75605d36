"""PC sampling: the instructions where samples landed, and why waves stalled."""

from __future__ import annotations

from profilectl.model.document import Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import Summary


def build(summary: Summary) -> Section | None:
    if not summary.hotspots and not summary.stall_reasons:
        return None
    tables = []
    if summary.hotspots:
        tables.append(table_of("hotspots", summary.hotspots, {"kernel": "kernel", "instruction": "instruction",
                                                              "source": "source", "samples": "samples", "percent": "%"},
                               title="PC sampling hotspots"))
    if summary.stall_reasons:
        tables.append(table_of("stall_reasons", summary.stall_reasons,
                               {"reason": "reason", "samples": "samples", "percent": "%"}, title="Stall reasons"))
    return Section(key="pc_sampling", title="PC sampling", tables=tuple(tables))
