"""User ranges (torch's record_function / user_annotation ranges, ROCTx ranges) and the profiler's
steps (ProfilerStep#N), each in a table of its own: calls, total and self CPU time, and the GPU time
launched inside each range, per rank. Neither is an operator: they hold the operators' time."""

from __future__ import annotations

import re

from profilectl.model.tables import AnnotationRow
from profilectl.model.document import Chart, Column, Section, TableBlock
from profilectl.read.summary import Summary

COLUMNS = (Column("rank", "rank"), Column("name", "name"), Column("calls", "calls", "count", "sum"),
           Column("total_ns", "total (CPU)", "ns", "sum"), Column("self_ns", "self (CPU)", "ns", "sum"),
           Column("gpu_ns", "GPU launched", "ns", "sum"), Column("min_ns", "min", "ns", "min", "wide"),
           Column("max_ns", "max", "ns", "max", "wide"))
STEP = re.compile(r"ProfilerStep#(\d+)$")  # torch.profiler's step() ranges


def is_profiler_step(name: str) -> bool:
    return STEP.match(name) is not None


def build(summary: Summary) -> Section | None:
    rows = summary.annotations
    if not rows:
        return None
    # one rank: no rank column to read; no launch linked (a CPU-only trace): no GPU column to read
    hidden = ({"rank"} if len({row.rank for row in rows}) == 1 else set()) | (
        {"gpu_ns"} if all(row.gpu_ns is None for row in rows) else set())
    columns = tuple(Column(c.name, c.title, c.unit, c.aggregate, "machine") if c.name in hidden else c for c in COLUMNS)
    ranges = [row for row in rows if not is_profiler_step(row.name)]  # heaviest first, as the summary has them
    steps = sorted((row for row in rows if is_profiler_step(row.name)), key=_step_order)
    tables = tuple(TableBlock(key=key, title=title, columns=columns,
                              rows=tuple(tuple(getattr(r, c.name) for c in columns) for r in part))
                   for key, title, part in (("annotations", "User ranges (record_function, ROCTx)", ranges),
                                            ("profiler_steps", "Profiler steps (ProfilerStep#N)", steps))
                   if part)
    notes = () if "gpu_ns" in hidden else ("GPU launched: the GPU time of the kernels, copies and memsets whose launch call ran inside the range "
             "on its thread (linked by correlation id), as torch's CUDA total counts it; what other threads launch "
             "(autograd's backward thread) is not under a range of the main thread",)
    charts = (Chart(kind="bar", title="User ranges by CPU time", table="annotations", y="total_ns", label="name",
                    extra=(("shares", False),)),) if ranges and len({r.rank for r in rows}) == 1 else ()
    return Section(key="annotations", title=tables[0].title or "User ranges", tables=tables, notes=notes, charts=charts)


def _step_order(row: AnnotationRow) -> tuple[str, int]:
    found = STEP.match(row.name)
    return (row.rank, int(found.group(1)) if found else 0)
