"""Hardware counters per kernel (heaviest GPU time first) and how each column was aggregated."""

from __future__ import annotations

from profilectl.model.document import Aggregate, Column, Section, TableBlock
from profilectl.read.summary import Summary, aggregation_legend

# The summary's words for each aggregation (summary.AGGREGATION_WORDS) as a document Aggregate
_AGGREGATE: dict[str, Aggregate] = {"sum over dispatches": "sum", "mean weighted by dispatch duration": "weighted_mean",
                                    "mean over dispatches (no durations known)": "mean", "max over dispatches": "max",
                                    "min over dispatches": "min"}


def build(summary: Summary) -> Section | None:
    rows = summary.counters_by_kernel
    if not rows:
        return None
    names = list(dict.fromkeys(k for r in rows for k in r))
    how = summary.counter_aggregation
    columns = tuple(Column(name=n, title=n, aggregate=_AGGREGATE.get(how.get(n, ""), "none")) for n in names)
    table = TableBlock(key="counters", title="Counters per kernel", columns=columns,
                       rows=tuple(tuple(r.get(n) for n in names) for r in rows))
    return Section(key="counters", title="Counters per kernel", tables=(table,), notes=tuple(aggregation_legend(summary)))
