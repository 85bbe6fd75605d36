"""Top kernels: one row per kernel, heaviest first, with the bars and the share of GPU time."""

from __future__ import annotations

import dataclasses

from profilectl.model.document import Chart, Section
from profilectl.report.sections.common import name_stats
from profilectl.read.summary import Summary

SHARE_TOP = 10  # kernels named in the share of GPU time; the rest is "other kernels"


def build(summary: Summary) -> Section | None:
    section = name_stats("kernels", "Top kernels", summary.kernels)
    if section is None:
        return None
    charts = (Chart(kind="bar", title="Top kernels by total time", table="kernels", y="total_ns", label="name"),
              Chart(kind="share", title="Share of GPU time", table="kernels", y="total_ns", label="name",
                    extra=(("top", SHARE_TOP), ("rest", "other kernels"))))
    return dataclasses.replace(section, charts=charts)
