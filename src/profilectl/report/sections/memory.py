"""GPU memory from torch's memory history (trace --memory; formats/memory_history.py): the peak and what
held it by category, allocated against reserved over time (a line chart in HTML), and for a run that
ran out of memory, the allocation that failed and the allocations alive then with the code that made
them."""

from __future__ import annotations

from typing import Any

from profilectl.formats import memory_history as memory
from profilectl.model.memory import MemoryReport
from profilectl.model.document import Chart, Column, Finding, Section, TableBlock
from profilectl.model.units import size

GIB = float(1 << 30)
PEAK = (Column("rank", "Rank"), Column("device", "GPU"), Column("peak_allocated_bytes", "Peak allocated", "bytes"),
        Column("reserved_at_peak_bytes", "Reserved then", "bytes"),
        Column("fragmentation_percent", "Reserved, not allocated, at the peak", "percent"),
        Column("peak_reserved_bytes", "Peak reserved", "bytes"),
        Column("torch_max_allocated_bytes", "torch max_memory_allocated", "bytes"),
        Column("events", "History events", "count"), Column("source", "Snapshot"))
CATEGORIES = (Column("rank", "Rank"), Column("device", "GPU"), Column("category", "Category"),
              Column("bytes", "At the peak", "bytes", "sum"), Column("percent", "% of the peak", "percent", "sum"),
              Column("allocations", "Allocations", "count", "sum"))
SERIES = (Column("series", "Series"), Column("at", "At"), Column("bytes", "Bytes", "bytes"))
FAILURE = (Column("rank", "Rank"), Column("device", "GPU"), Column("requested_bytes", "Requested", "bytes"),
           Column("device_free_bytes", "Free on the device", "bytes"), Column("allocated_bytes", "Allocated", "bytes"),
           Column("reserved_bytes", "Reserved", "bytes"), Column("requested_by", "Asked for by"))
ALIVE = (Column("rank", "Rank"), Column("bytes", "Size", "bytes"), Column("category", "Category"),
         Column("made_by", "Made by"), Column("stack", "Stack (innermost first)"))


def _gib(value: float) -> str:
    return size(value)


def _fragmentation(report: MemoryReport) -> float | None:
    reserved = report.reserved_at_peak
    return 100.0 * (reserved - report.peak_allocated) / reserved if reserved else None


def _peak_finding(report: MemoryReport) -> Finding:
    shares = ", ".join(f"{s.category} {100.0 * s.bytes / report.peak_allocated:.0f} %" for s in report.by_category[:5]) \
        if report.peak_allocated else "nothing allocated"
    evidence = [f"{s.category}: {_gib(s.bytes)} in {s.allocations} allocation(s)" for s in report.by_category]
    fragmentation = _fragmentation(report)
    if fragmentation is not None:
        evidence.append(f"reserved by the caching allocator then: {_gib(report.reserved_at_peak)} ({fragmentation:.0f} % of "
                        "it not allocated to a tensor: cached blocks and fragmentation)")
    if report.torch_max_allocated is not None:
        evidence.append(f"torch.cuda.max_memory_allocated(): {_gib(report.torch_max_allocated)}")
    return Finding(verdict="memory-peak", sentence=f"rank {report.rank} GPU {report.device} peaked at "
                   f"{_gib(report.peak_allocated)} allocated: {shares}", evidence=tuple(evidence),
                   scope=f"rank {report.rank}, GPU {report.device}: {report.events} allocator events ({report.source})")


def _failure_finding(report: MemoryReport) -> Finding | None:
    failure = report.failure
    if failure is None:
        return None
    where = f" at {failure.requested_by}" if failure.requested_by else ""
    free = f", {_gib(failure.device_free)} free on the device" if failure.device_free is not None else ""
    evidence = [f"{s.category}: {_gib(s.bytes)} in {s.allocations} allocation(s)" for s in failure.by_category]
    evidence += [f"{_gib(a.bytes)} {a.category}" + (f", made by {a.made_by}" if a.made_by else "")
                 for a in failure.largest[:5]]
    return Finding(verdict="out-of-memory", sentence=f"rank {report.rank} GPU {report.device} ran out of memory asking "
                   f"for {_gib(failure.requested)}{where}, with {_gib(failure.allocated)} allocated and "
                   f"{_gib(failure.reserved)} reserved{free}", evidence=tuple(evidence),
                   next_step="free what the largest categories hold at that moment: smaller batch or sequence, "
                             "activation checkpointing, a sharded optimizer (its state), lower-precision parameters",
                   scope=f"rank {report.rank}, GPU {report.device} ({report.source})")


def build(summary: Any) -> Section | None:
    reports: tuple[MemoryReport, ...] = summary.memory
    if not reports:
        return None
    peaks = tuple((r.rank, r.device, r.peak_allocated, r.reserved_at_peak, _fragmentation(r), r.peak_reserved,
                   r.torch_max_allocated, r.events, r.source) for r in reports)
    categories = tuple((r.rank, r.device, s.category, s.bytes, 100.0 * s.bytes / r.peak_allocated if r.peak_allocated
                        else None, s.allocations) for r in reports for s in r.by_category)
    series = tuple((f"rank {r.rank} GPU {r.device} {what}", p.at, getattr(p, what)) for r in reports
                   for what in ("allocated", "reserved") for p in r.series)
    tables = [TableBlock("memory_peak", PEAK, peaks, title="Peak GPU memory"),
              TableBlock("memory_by_category", CATEGORIES, categories, title="What held the peak"),
              TableBlock("memory_series", SERIES, series, title="Allocated and reserved over time", shown=0)]
    failed = [r for r in reports if r.failure is not None]
    if failed:
        tables.append(TableBlock("memory_failure", FAILURE, tuple(
            (r.rank, r.device, f.requested, f.device_free, f.allocated, f.reserved, f.requested_by)
            for r in failed if (f := r.failure) is not None), title="Out of memory"))
        tables.append(TableBlock("memory_failure_alive", ALIVE, tuple(
            (r.rank, a.bytes, a.category, a.made_by, a.stack) for r in failed if r.failure is not None
            for a in r.failure.largest), title="Alive when it failed (largest first)", shown=15))
    findings = [found for r in reports if (found := _failure_finding(r)) is not None] + [_peak_finding(r) for r in reports]
    rules = memory.rules()["doc"]
    notes = ["categories from each allocation's Python stack (profiling/memory_categories.yaml, the first rule that "
             "matches): " + "; ".join(f"{rule['category']}: {str(rule.get('reason', '')).strip()}"
                                     for rule in rules.get("rules") or ()) +
             f"; {rules.get('no_python_frame')}: {str(rules.get('no_python_frame_reason', '')).strip()}; "
             f"{rules.get('before_history')}: {str(rules.get('before_history_reason', '')).strip()}",
             "allocated: bytes held by tensors; reserved: bytes the caching allocator holds from the driver; the "
             "difference is cached blocks and fragmentation"]
    notes += [f"rank {r.rank} GPU {r.device}: {note}" for r in reports for note in r.notes]
    basis = {r.time_basis for r in reports}
    chart = Chart(kind="line", title="GPU memory: allocated against reserved", table="memory_series", x="at",
                  y="bytes", label="series",
                  extra=(("what", "GPU memory"), ("unit", "GiB"), ("series_name", "{}"), ("scale", GIB),
                         ("x_what", "time (s)" if basis == {"seconds"} else "allocator events"),
                         ("source", "torch memory history")))
    return Section(key="memory", title="GPU memory (torch's memory history)", tables=tuple(tables),
                   findings=tuple(findings), notes=tuple(notes), charts=(chart,))
