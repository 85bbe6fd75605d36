"""Operators (CPU): one row per name, by self time where the tool reports it (torch's Self CPU).

Operators nest (aten::linear holds aten::addmm, which holds the time of the matrix product), so an
operator's inclusive total counts its children's time again: ranked by self time, with the share
of the sum of self times (which adds up to 100 %) and the inclusive total beside it."""

from __future__ import annotations

from profilectl.model.document import Chart, Column, Section, TableBlock
from profilectl.report.sections.common import name_stats
from profilectl.read.summary import Summary

BY_SELF = (Column("name", "name"), Column("calls", "calls", "count", "sum"), Column("self_ns", "self", "ns", "sum"),
           Column("percent", "% self", "percent", "sum"), Column("total_ns", "total (incl.)", "ns", "none"),
           Column("mean_ns", "mean (incl.)", "ns", "weighted_mean"), Column("min_ns", "min", "ns", "min", "wide"),
           Column("max_ns", "max", "ns", "max", "wide"), Column("std_ns", "std", "ns", "none", "wide"))


def build(summary: Summary) -> Section | None:
    rows = summary.operators
    if not rows:
        return None
    if any(r.self_ns is None for r in rows):  # no nesting known (XLA's HLO ops): their totals add up
        return name_stats("operators", "Operators", rows)
    title = "Operators (CPU), by self time"
    table = TableBlock(key="operators", title=title, columns=BY_SELF,
                       rows=tuple(tuple(getattr(r, c.name) for c in BY_SELF) for r in rows))
    chart = Chart(kind="bar", title="Share of the operators' CPU self time", table="operators",
                  y="self_ns", label="name")
    return Section(key="operators", title=title, tables=(table,), charts=(chart,))
