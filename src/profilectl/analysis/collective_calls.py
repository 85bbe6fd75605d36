"""Collectives call by call: what each moved, how fast, whether compute hid it, and who arrived last.

From the collectives torch records (model/tables.py CollectiveCall: the NCCL/RCCL kernel, or the
host's record_param_comms range where a rank has no such kernel, as gloo's collectives have none):
- size S = the larger of "In msg nelems" and "Out msg nelems" x the element size of "dtype", and
  the bandwidths of nccl-tests (profiling/collectives.yaml, doc/PERFORMANCE.md): algbw = S / t,
  busbw = algbw x the kind's factor over the group's n ranks;
- exposed or hidden: the part of the call's time that compute kernels of the same rank covered
  (hidden: formats/torch_trace.py measures it with analysis/intervals.py as the trace is read), the
  rest exposed;
- matched across ranks: by (process group, sequence number) where every call of the group carries
  torch's "Seq", else by (process group, kind, the call's position among that group's calls of that
  kind on the rank). A rank arrives when its call starts (the NCCL kernel starts once the rank's
  stream reaches it); times are put on one clock by each trace's baseTimeNanoseconds. The last to
  arrive holds the others up by the lag, its start less the first's; the time the data moved is the
  last arriver's own duration (it waited least), and the matched call's bandwidths use it.
Which rank is the straggler stays analysis/stragglers.py's rule (waiting per step); these are the
calls behind it.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from profilectl import data
from profilectl.analysis.formulas import FormulaError, evaluate
from profilectl.model.tables import CollectiveCall, TraceClock

if TYPE_CHECKING:
    from profilectl.model.timeline import RankTimeline

FILE = "collectives.yaml"
# Rows kept in the summary: every call counts in the kinds, matched calls and last arrivals; the
# per-call and per-match tables keep the longest calls (a job of 8 ranks x 50 k calls would
# otherwise write millions of rows into summary.json)
CALLS_KEPT = 20_000
MATCHED_KEPT = 10_000


@functools.lru_cache(maxsize=1)
def kinds() -> dict[str, Any]:
    doc = data.load_mapping(FILE)
    by_name = {str(name): kind for kind, spec in (doc.get("kinds") or {}).items() for name in spec.get("names") or ()}
    factors = {kind: spec.get("busbw_factor", 1) for kind, spec in (doc.get("kinds") or {}).items()}
    return {"by_name": by_name, "factors": factors, "no_bandwidth": frozenset(doc.get("no_bandwidth") or ()),
            "dtype_bytes": {str(k): int(v) for k, v in (doc.get("dtype_bytes") or {}).items()}}


def kind_of(name: str) -> str:
    return str(kinds()["by_name"].get(name, name))


def busbw_factor(kind: str, ranks: int | None) -> float | None:
    """nccl-tests' factor for this kind over n ranks; None for a kind without one or n unknown."""
    expression = kinds()["factors"].get(kind)
    if expression is None or not ranks or ranks < 1:
        return None
    try:
        return float(evaluate(expression, {"n": ranks}))
    except FormulaError:
        return None


def size_bytes(call: CollectiveCall) -> int | None:
    elements = max((n for n in (call.in_elements, call.out_elements) if n is not None), default=None)
    width = kinds()["dtype_bytes"].get(call.dtype or "")
    return elements * width if elements is not None and width is not None else None


# ------------------------------------------------------------------ read time: hidden behind compute
def compute_overlap(calls: Sequence[CollectiveCall], timeline: "RankTimeline") -> tuple[CollectiveCall, ...]:
    """Each call with the time compute kernels of its rank (every kernel but NCCL's/RCCL's) ran
    during it: one union of those kernels, then each call's window in O(log n)."""
    import dataclasses

    from profilectl.model.collectives import collective_names
    from profilectl.analysis.intervals import Blocks, union
    from profilectl.model.timeline import KERNEL
    if not calls:
        return ()
    compute = (timeline.kind == KERNEL) & ~collective_names(timeline.names)[timeline.name] if len(timeline.name) \
        else timeline.kind == KERNEL
    blocks = union(timeline.start[compute], timeline.end[compute])
    if not len(blocks[0]):
        return tuple(dataclasses.replace(c, compute_overlap_ns=0) for c in calls)
    covered = Blocks(blocks)
    return tuple(dataclasses.replace(c, compute_overlap_ns=covered.within(c.start_ns, c.end_ns)) for c in calls)


# ------------------------------------------------------------------ the tables
@dataclass(frozen=True)
class CallRow:
    """One collective call of one rank: its kind, group, size, duration, bandwidths, the part compute hid, and when
    it arrived against the other ranks."""
    rank: str
    kind: str  # allreduce, allgather, ... (profiling/collectives.yaml), else the name as written
    name: str  # "Collective name" as written
    process_group: str | None
    group_desc: str | None
    sequence: int | None
    position: int  # its place among this rank's calls of this group and kind, from 0
    side: str  # gpu: the NCCL/RCCL kernel; host: the host's range (gloo, or no kernel recorded)
    duration_ns: int
    bytes: int | None
    dtype: str | None
    group_size: int | None
    group_ranks: str | None
    algbw: float | None  # bytes/s
    busbw: float | None
    hidden_ns: int | None  # covered by the rank's compute kernels
    exposed_ns: int | None
    arrival_ns: int  # its start on the common clock (ns since the epoch where the trace says its base)
    late_ns: int | None = None  # after the first rank to arrive at the same call (matched calls)
    last: bool | None = None  # the last of its call's ranks to arrive


@dataclass(frozen=True)
class MatchedCall:
    """One collective as every rank of its group saw it."""
    process_group: str | None
    kind: str
    key: int  # the sequence number, or the position
    matched_by: str  # "seq" or "order"
    ranks: int
    bytes: int | None
    first_rank: str
    last_rank: str  # "" where they all arrived at once
    lag_ns: int  # the last arrival less the first
    transfer_ns: int  # the last arriver's duration: the time the data moved, waiting aside
    algbw: float | None
    busbw: float | None


@dataclass(frozen=True)
class KindRow:
    """Per kind, process group, size and dtype: the calls together (every rank's)."""
    kind: str
    process_group: str | None
    bytes: int | None
    dtype: str | None
    group_size: int | None
    calls: int
    total_ns: int
    mean_ns: float
    algbw: float | None  # from the total bytes over the total time
    busbw: float | None
    exposed_ns: int | None
    hidden_ns: int | None


@dataclass(frozen=True)
class LastArrivals:
    """Per rank: how often it was the last to arrive at a matched call, and by how much."""
    rank: str
    calls: int  # matched calls it took part in
    last: int  # ... where it arrived last
    lag_ns: int  # summed over those
    median_lag_ns: float | None


@dataclass(frozen=True)
class CollectiveCalls:
    """The collectives call by call: each rank's calls, totals per kind, calls matched across ranks, last arrivals."""
    calls: tuple[CallRow, ...]
    kinds: tuple[KindRow, ...]
    matched: tuple[MatchedCall, ...]
    last_arrivals: tuple[LastArrivals, ...]
    clock: str  # how the ranks' times were put on one clock
    notes: tuple[str, ...] = ()


def _rate(size: int | None, ns: int) -> float | None:
    return size / (ns / 1e9) if size is not None and ns > 0 else None


def _chosen(collectives: Sequence[CollectiveCall]) -> dict[str, list[CollectiveCall]]:
    """Per rank, its NCCL/RCCL kernels where it has any, else its host ranges; in time order."""
    by_rank: dict[str, list[CollectiveCall]] = {}
    for call in collectives:
        by_rank.setdefault(call.rank, []).append(call)
    out = {}
    for rank, calls in by_rank.items():
        gpu = [c for c in calls if c.side == "gpu"]
        out[rank] = sorted(gpu or calls, key=lambda c: (c.start_ns, c.end_ns))
    return out


def analyse(collectives: Sequence[CollectiveCall], clocks: Sequence[TraceClock] = ()) -> CollectiveCalls | None:
    if not collectives:
        return None
    bases = {c.rank: c.base_ns for c in clocks}
    chosen = _chosen(collectives)
    no_bandwidth = kinds()["no_bandwidth"]
    rows: list[CallRow] = []
    for rank, calls in chosen.items():
        positions: dict[tuple[str | None, str], int] = {}
        for call in calls:
            kind = kind_of(call.name)
            position = positions.get((call.process_group, kind), 0)
            positions[(call.process_group, kind)] = position + 1
            duration = call.end_ns - call.start_ns
            size = None if call.name in no_bandwidth else size_bytes(call)
            algbw = _rate(size, duration)
            factor = busbw_factor(kind, call.group_size)
            hidden = min(call.compute_overlap_ns, duration) if call.compute_overlap_ns is not None else None
            rows.append(CallRow(
                rank=rank, kind=kind, name=call.name, process_group=call.process_group,
                group_desc=call.process_group_desc, sequence=call.sequence, position=position, side=call.side,
                duration_ns=duration, bytes=size, dtype=call.dtype, group_size=call.group_size,
                group_ranks=call.group_ranks, algbw=algbw,
                busbw=algbw * factor if algbw is not None and factor is not None else None,
                hidden_ns=hidden, exposed_ns=duration - hidden if hidden is not None else None,
                arrival_ns=call.start_ns + bases.get(rank, 0)))
    rows, matched = _match(rows)
    notes = []
    if len(chosen) > 1:
        with_base = sum(1 for r in chosen if r in bases)
        clock = ("each trace's baseTimeNanoseconds (ranks on different hosts agree as far as their clocks do)"
                 if with_base == len(chosen) else "the traces' timestamps as written" if not with_base else
                 f"baseTimeNanoseconds for {with_base} of {len(chosen)} ranks, the others' timestamps as written: "
                 "their arrivals do not compare")
    else:
        clock = "one rank: no matching"
    if any(r.side == "gpu" for r in rows):
        notes.append("a call's time is its NCCL/RCCL kernel's, waiting for the other ranks included: a rank that "
                     "arrived early shows a long call and a low bandwidth; the matched calls' bandwidths use the "
                     "last arriver's time")
    kept_calls, kept_matched = _longest(rows, CALLS_KEPT, "duration_ns"), _longest(matched, MATCHED_KEPT, "lag_ns")
    if len(kept_calls) < len(rows) or len(kept_matched) < len(matched):
        notes.append(f"tables kept to the longest {len(kept_calls):,} of {len(rows):,} calls and the {len(kept_matched):,} "
                     f"of {len(matched):,} matched calls with the largest lag; the kinds and last arrivals count all")
    return CollectiveCalls(calls=kept_calls, kinds=_kinds(rows), matched=kept_matched,
                           last_arrivals=_last_arrivals(rows, matched), clock=clock, notes=tuple(notes))


def _longest(rows: Sequence[Any], limit: int, by: str) -> tuple[Any, ...]:
    """At most `limit` rows, the largest by `by`, in their own order."""
    if len(rows) <= limit:
        return tuple(rows)
    keep = set(sorted(range(len(rows)), key=lambda i: -getattr(rows[i], by))[:limit])
    return tuple(row for i, row in enumerate(rows) if i in keep)


def _match(rows: list[CallRow]) -> tuple[list[CallRow], tuple[MatchedCall, ...]]:
    import dataclasses
    groups: dict[str | None, list[CallRow]] = {}
    for row in rows:
        groups.setdefault(row.process_group, []).append(row)
    by_key: dict[tuple[Any, ...], list[int]] = {}
    how: dict[str | None, str] = {}
    for group, members in groups.items():
        how[group] = "seq" if all(r.sequence is not None for r in members) else "order"
    for index, row in enumerate(rows):
        if how[row.process_group] == "seq":
            key: tuple[Any, ...] = (row.process_group, "seq", row.sequence)
        else:
            key = (row.process_group, row.kind, row.position)
        by_key.setdefault(key, []).append(index)
    matched = []
    out = list(rows)
    for key, indices in by_key.items():
        members = [rows[i] for i in indices]
        if len({m.rank for m in members}) < 2 or len({m.rank for m in members}) != len(members):
            continue  # one rank only, or a rank twice: nothing to compare
        first = min(members, key=lambda m: m.arrival_ns)
        last = max(members, key=lambda m: m.arrival_ns)
        held = last.arrival_ns > first.arrival_ns  # all in at once: nobody held anybody, nobody was last
        for i in indices:
            out[i] = dataclasses.replace(rows[i], late_ns=rows[i].arrival_ns - first.arrival_ns,
                                         last=held and rows[i] is last)
        transfer = last.duration_ns
        size = last.bytes
        algbw = _rate(size, transfer)
        factor = busbw_factor(last.kind, last.group_size or len(members))
        matched.append(MatchedCall(
            process_group=key[0], kind=last.kind, key=int(key[2]) if key[2] is not None else 0,
            matched_by=how[key[0]], ranks=len(members), bytes=size, first_rank=first.rank,
            last_rank=last.rank if held else "",
            lag_ns=last.arrival_ns - first.arrival_ns, transfer_ns=transfer, algbw=algbw,
            busbw=algbw * factor if algbw is not None and factor is not None else None))
    matched.sort(key=lambda m: (str(m.process_group), m.kind, m.key))
    return out, tuple(matched)


def _kinds(rows: Sequence[CallRow]) -> tuple[KindRow, ...]:
    groups: dict[tuple[Any, ...], list[CallRow]] = {}
    for row in rows:
        groups.setdefault((row.kind, row.process_group, row.bytes, row.dtype, row.group_size), []).append(row)
    out = []
    for (kind, group, size, dtype, group_size), members in groups.items():
        total = sum(m.duration_ns for m in members)
        moved = sum(m.bytes for m in members if m.bytes is not None) if size is not None else None
        algbw = _rate(moved, total)
        factor = busbw_factor(kind, group_size)
        known = [m for m in members if m.hidden_ns is not None]
        out.append(KindRow(
            kind=kind, process_group=group, bytes=size, dtype=dtype, group_size=group_size, calls=len(members),
            total_ns=total, mean_ns=total / len(members), algbw=algbw,
            busbw=algbw * factor if algbw is not None and factor is not None else None,
            exposed_ns=sum(m.exposed_ns or 0 for m in known) if known else None,
            hidden_ns=sum(m.hidden_ns or 0 for m in known) if known else None))
    out.sort(key=lambda k: -k.total_ns)
    return tuple(out)


def _last_arrivals(rows: Sequence[CallRow], matched: Sequence[MatchedCall]) -> tuple[LastArrivals, ...]:
    if not matched:
        return ()
    ranks: dict[str, list[int]] = {}
    taking_part: dict[str, int] = {}
    for row in rows:
        if row.last is None:
            continue
        taking_part[row.rank] = taking_part.get(row.rank, 0) + 1
        if row.last:
            first_lag = row.late_ns or 0
            ranks.setdefault(row.rank, []).append(first_lag)
    out = [LastArrivals(rank=rank, calls=count, last=len(ranks.get(rank, [])), lag_ns=sum(ranks.get(rank, [])),
                        median_lag_ns=statistics.median(ranks[rank]) if ranks.get(rank) else None)
           for rank, count in taking_part.items()]
    out.sort(key=lambda a: (-a.lag_ns, a.rank))
    return tuple(out)
