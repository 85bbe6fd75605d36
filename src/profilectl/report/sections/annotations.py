"""User annotations (torch's record_function / user_annotation ranges, ProfilerStep#N): calls,
total and self CPU time, and the GPU time launched inside each range, per rank."""

from __future__ import annotations

from profilectl.model.document import Column, Section, TableBlock
from profilectl.read.summary import Summary

COLUMNS = (Column("rank", "rank"), Column("name", "name"), Column("calls", "calls", "count", "sum"),
           Column("total_ns", "total (CPU)", "ns", "sum"), Column("self_ns", "self (CPU)", "ns", "sum"),
           Column("gpu_ns", "GPU launched", "ns", "sum"), Column("min_ns", "min", "ns", "min", "wide"),
           Column("max_ns", "max", "ns", "max", "wide"))


def build(summary: Summary) -> Section | None:
    rows = summary.annotations
    if not rows:
        return None
    # one rank: no rank column to read; no launch linked (a CPU-only trace): no GPU column to read
    hidden = ({"rank"} if len({row.rank for row in rows}) == 1 else set()) | (
        {"gpu_ns"} if all(row.gpu_ns is None for row in rows) else set())
    columns = tuple(Column(c.name, c.title, c.unit, c.aggregate, "machine") if c.name in hidden else c for c in COLUMNS)
    table = TableBlock(key="annotations", title="User annotations",
                       columns=columns, rows=tuple(tuple(getattr(r, c.name) for c in columns) for r in rows))
    notes = () if "gpu_ns" in hidden else ("GPU launched: the GPU time of the kernels, copies and memsets whose launch call ran inside the range "
             "on its thread (linked by correlation id), as torch's CUDA total counts it; what other threads launch "
             "(autograd's backward thread) is not under a range of the main thread",)
    return Section(key="annotations", title="User annotations", tables=(table,), notes=notes)
