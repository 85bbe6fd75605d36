"""Per rank: kernel time (CPU operator time for a CPU-only job), collectives, the heaviest kernel, and
the straggler."""

from __future__ import annotations

from profilectl.model.document import Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import RANK_COLUMNS, Summary, imbalance_line


def build(summary: Summary) -> Section | None:
    if not summary.ranks:
        return None
    cpu = all(rank.basis == "cpu" for rank in summary.ranks)  # a CPU-only job: operators, not kernels
    titles = {"rank": "rank", "host": "host", "basis": "basis", "total_ns": "CPU op time" if cpu else "kernel time",
              "dispatches": "operator calls" if cpu else "dispatches", "collective_percent": "in collectives",
              "top_kernel": "top operator" if cpu else "top kernel", "status": "status"}
    table = table_of("ranks", summary.ranks, titles, title="Per rank", shown=len(summary.ranks), names=RANK_COLUMNS)
    line = imbalance_line(summary)
    return Section(key="ranks", title="Per rank", tables=(table,), notes=(line,) if line else ())
