"""API calls: one row per name, heaviest first."""

from __future__ import annotations

from profilectl.model.document import Section
from profilectl.report.sections.common import name_stats
from profilectl.read.summary import Summary


def build(summary: Summary) -> Section | None:
    return name_stats("api", "API calls", summary.api)
