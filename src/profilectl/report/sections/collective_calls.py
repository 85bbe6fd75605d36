"""Collectives call by call (analysis/collective_calls.py): per kind, process group, size and dtype;
each call with its bandwidths (nccl-tests' formulas) and how much of it compute hid; each call matched
across ranks with who arrived last and by how much; and the NCCL/RCCL inspector's own records where
the job wrote them."""

from __future__ import annotations

import statistics
from typing import Any

from profilectl.analysis.collective_calls import CollectiveCalls
from profilectl.model.collectives import InspectorRecord
from profilectl.model.document import Column, Finding, Section, TableBlock
from profilectl.model.units import duration_ns, si

KINDS = (Column("kind", "Collective"), Column("process_group", "Group"), Column("bytes", "Size", "bytes"),
         Column("dtype", "dtype"), Column("group_size", "Ranks", "count"), Column("calls", "Calls", "count", "sum"),
         Column("total_ns", "Time", "ns", "sum"), Column("mean_ns", "Mean", "ns", "weighted_mean"),
         Column("algbw_bytes_per_s", "algbw", "bytes_per_s"), Column("busbw_bytes_per_s", "busbw", "bytes_per_s"),
         Column("exposed_ns", "Exposed", "ns", "sum"), Column("hidden_ns", "Hidden by compute", "ns", "sum"))
CALLS = (Column("rank", "Rank"), Column("kind", "Collective"), Column("process_group", "Group"),
         Column("sequence", "Seq", "count"), Column("position", "Position", "count", show="machine"),
         Column("side", "Side", show="machine"), Column("bytes", "Size", "bytes"), Column("dtype", "dtype"),
         Column("group_size", "Ranks", "count"), Column("duration_ns", "Time", "ns", "sum"),
         Column("algbw_bytes_per_s", "algbw", "bytes_per_s"), Column("busbw_bytes_per_s", "busbw", "bytes_per_s"),
         Column("exposed_ns", "Exposed", "ns", "sum"), Column("hidden_ns", "Hidden", "ns", "sum"),
         Column("late_ns", "Arrived after the first", "ns"), Column("last", "Last"),
         Column("arrival_ns", "Arrival (epoch ns)", show="machine"), Column("name", "Name as written", show="machine"))
MATCHED = (Column("process_group", "Group"), Column("kind", "Collective"), Column("key", "Seq / position", "count"),
           Column("matched_by", "Matched by"), Column("ranks", "Ranks", "count"), Column("bytes", "Size", "bytes"),
           Column("first_rank", "First in"), Column("last_rank", "Last in"), Column("lag_ns", "Lag", "ns", "sum"),
           Column("transfer_ns", "Transfer (last's time)", "ns", "sum"),
           Column("algbw_bytes_per_s", "algbw", "bytes_per_s"), Column("busbw_bytes_per_s", "busbw", "bytes_per_s"))
LAST = (Column("rank", "Rank"), Column("calls", "Matched calls", "count", "sum"),
        Column("last", "Arrived last", "count", "sum"), Column("lag_ns", "Others held (total)", "ns", "sum"),
        Column("median_lag_ns", "Median lag when last", "ns"))
INSPECTOR = (Column("host", "Host"), Column("rank", "Rank", "count"), Column("communicator", "Communicator"),
             Column("kind", "Collective"), Column("bytes", "Size", "bytes"), Column("calls", "Calls", "count", "sum"),
             Column("mean_time_ns", "Mean time", "ns"), Column("algbw_bytes_per_s", "algbw (inspector)", "bytes_per_s"),
             Column("busbw_bytes_per_s", "busbw (inspector)", "bytes_per_s"), Column("timing", "Timing source"))


def _row(value: Any, columns: tuple[Column, ...], renames: dict[str, str]) -> tuple[Any, ...]:
    return tuple(getattr(value, renames.get(c.name, c.name)) for c in columns)


BANDWIDTH = {"algbw_bytes_per_s": "algbw", "busbw_bytes_per_s": "busbw"}


def _inspector_rows(records: tuple[InspectorRecord, ...]) -> tuple[tuple[Any, ...], ...]:
    groups: dict[tuple[Any, ...], list[InspectorRecord]] = {}
    for r in records:
        groups.setdefault((r.host, r.rank, r.communicator, r.kind, r.bytes, r.timing), []).append(r)
    rows = []
    for (host, rank, comm, kind, size, timing), members in groups.items():
        times = [m.time_us for m in members if m.time_us is not None]
        alg = [m.algbw_gbs for m in members if m.algbw_gbs is not None]
        bus = [m.busbw_gbs for m in members if m.busbw_gbs is not None]
        rows.append((host, rank, comm, kind, size, len(members), statistics.fmean(times) * 1e3 if times else None,
                     statistics.fmean(alg) * 1e9 if alg else None, statistics.fmean(bus) * 1e9 if bus else None,
                     timing))
    rows.sort(key=lambda r: (-(r[5] * (r[6] or 0)), str(r[0]), r[1] or 0))
    return tuple(rows)


def _findings(result: CollectiveCalls) -> list[Finding]:
    findings = []
    heaviest = max(result.last_arrivals, key=lambda a: a.lag_ns, default=None)
    if heaviest is not None and heaviest.last:
        share = f"{heaviest.last} of {heaviest.calls}"
        findings.append(Finding(
            verdict="last-to-arrive", sentence=f"rank {heaviest.rank} arrived last at {share} matched collective "
            f"calls, holding the others {duration_ns(heaviest.lag_ns)} in all (median "
            f"{duration_ns(heaviest.median_lag_ns)} a call)",
            evidence=tuple(f"rank {a.rank}: last at {a.last} of {a.calls}, {duration_ns(a.lag_ns)} held"
                           for a in result.last_arrivals[:8]),
            scope=f"{len(result.matched)} calls matched across ranks; clock: {result.clock}"))
    exposed = sum(k.exposed_ns or 0 for k in result.kinds)
    total = sum(k.total_ns for k in result.kinds)
    if total and any(k.exposed_ns is not None for k in result.kinds):
        top = max(result.kinds, key=lambda k: k.exposed_ns or 0)
        findings.append(Finding(
            verdict="exposed-communication" if exposed > total / 2 else "hidden-communication",
            sentence=f"{duration_ns(exposed)} of {duration_ns(total)} in collectives ran with no compute beside it "
                     f"({100.0 * exposed / total:.0f} % exposed)",
            evidence=(f"most exposed: {top.kind} of {si(top.bytes or 0, 'B')} ({top.dtype}) in group "
                      f"{top.process_group}: {duration_ns(top.exposed_ns)} over {top.calls} call(s)",),
            scope="every rank's collective calls"))
    return findings


def build(summary: Any) -> Section | None:
    result: CollectiveCalls | None = summary.collective_calls
    records: tuple[InspectorRecord, ...] = summary.inspector
    if result is None and not records:
        return None
    tables = []
    notes = []
    findings: list[Finding] = []
    if result is not None:
        tables += [TableBlock("collective_kinds", KINDS, tuple(_row(k, KINDS, BANDWIDTH) for k in result.kinds),
                              title="Collectives by kind, group, size and dtype", shown=20),
                   TableBlock("collective_calls", CALLS, tuple(_row(c, CALLS, BANDWIDTH) for c in result.calls),
                              title="Each collective call", shown=20)]
        if result.matched:
            tables += [TableBlock("collective_matched", MATCHED, tuple(_row(m, MATCHED, BANDWIDTH)
                                                                      for m in result.matched),
                                  title="Each call across its ranks: who arrived last", shown=20),
                       TableBlock("collective_last_arrivals", LAST, tuple(_row(a, LAST, {}) for a in result.last_arrivals),
                                  title="Last arrivals per rank")]
        notes += ["size: the larger of In/Out msg nelems x the dtype's bytes (nccl-tests' S); algbw = size / time; "
                  "busbw = algbw x nccl-tests' factor (allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall "
                  "(n-1)/n; broadcast, reduce, send, recv 1: profiling/collectives.yaml, nccl-tests "
                  "doc/PERFORMANCE.md)",
                  "exposed: the part of a call no compute kernel of its rank ran beside; hidden: the rest",
                  f"matched across ranks by (group, Seq) where the trace has torch's sequence numbers, else by the "
                  f"call's position among its group's calls of its kind; clock: {result.clock}", *result.notes]
        findings += _findings(result)
    if records:
        tables.append(TableBlock("nccl_inspector", INSPECTOR, _inspector_rows(records),
                                 title="NCCL/RCCL inspector: its own measurement", shown=20))
        notes.append(f"{len(records)} record(s) of the NCCL/RCCL inspector plugin (ext-profiler/inspector): its "
                     "time and bandwidths as it measured them, one line per collective per communicator")
    return Section(key="collective_calls", title="Collectives call by call", tables=tuple(tables),
                   findings=tuple(findings), notes=tuple(notes))
