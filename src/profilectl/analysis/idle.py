"""Idle time explained: for every hole in a rank's GPU activity, what the host was doing across it,
and in which phase of the run it lies. The rules (which host events name which cause, in which
order, and the thresholds) are data: profiling/verdicts.yaml, each with its reason.

Definitions:
- a gap is a hole in the union of the rank's GPU activity (kernels, copies, memsets on every
  stream): the same busy union as the timeline (analysis/timeline.py), so the gaps add up to its
  idle time. Holes shorter than `gap_min_ns` are launch granularity (cause `launch`).
- a gap's cause is the first rule of verdicts.yaml's `causes` that explains it: `ends-at-gap` (a
  synchronising call was blocking when the GPU went idle and returned in the gap), `covers` (the
  rule's host events run across at least `cover_min` of the gap, any thread; a synchronisation
  names only gaps up to `sync_gap_max_ns`), `short-gap` (shorter
  than `launch_gap_max_ns`), `operator` (CPU operators cover it: named by the one with the most
  time across such gaps), `untraced` (the trace has no host event at all: the host side is not in
  it), `rest` (no recorded host event across the gap: code between recorded calls, Python in torch
  traces).
- phases come from the workload's ProfilerStep#N marks (the side, GPU or CPU, with more steps, as
  the timeline's steps): start-up before the first step, warm-up for the first steps, steady
  after them, and the last step apart (the profiler may stop inside it); with no marks the whole
  run is one phase and the verdict says it covers the whole run.

Beside it, HTA's own idle-time breakdown (host wait, kernel wait, other per stream: HTA's
get_idle_time_breakdown), computed from the same kernels and launch calls, for comparison
(docs/architecture.md says where the two definitions differ).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from profilectl.analysis.timeline import CHUNK_ROWS, HOST_OPERATOR, Marker, RankTimeline, _union, busy_union, \
    small_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Intervals = tuple[NDArray[np.int64], NDArray[np.int64]]

STEP_PHASES = ("startup", "warmup", "steady", "last", "teardown")


# ---------------------------------------------------------------- the rules, from data
@dataclass(frozen=True)
class CauseRule:
    key: str
    title: str
    rule: str  # ends-at-gap, covers, short-gap, operator, rest
    pattern: "re.Pattern[str] | None"
    reason: str
    verdict: str
    next_step: str
    by_program: tuple[tuple[str, str], ...] = ()  # (program, next_step) where the advice depends on it

    def next_step_for(self, program: str) -> str:
        """The advice for a program of this kind (RankTimeline.program), else the general one."""
        return dict(self.by_program).get(program, self.next_step)


@dataclass(frozen=True)
class Rules:
    thresholds: dict[str, Any]
    causes: tuple[CauseRule, ...]
    frames: "re.Pattern[str]"  # host ranges that frame whole steps or phases: they name no gap

    def __getitem__(self, name: str) -> Any:
        return self.thresholds[name]

    def cause(self, key: str) -> CauseRule:
        return next(c for c in self.causes if c.key == key)


@functools.lru_cache(maxsize=None)
def rules() -> Rules:
    from profilectl.data import load_mapping
    from profilectl.errors import DataError
    doc = load_mapping("verdicts.yaml")
    try:
        causes = tuple(CauseRule(key=c["key"], title=c["title"], rule=c["rule"],
                                 pattern=re.compile("|".join(f"(?:{n})" for n in c["names"]), re.IGNORECASE)
                                 if c.get("names") else None,
                                 reason=" ".join(str(c["reason"]).split()), verdict=c["verdict"],
                                 next_step=" ".join(str(c["next_step"]).split()),
                                 by_program=tuple((str(k), " ".join(str(v).split()))
                                                  for k, v in (c.get("next_step_by_program") or {}).items()))
                       for c in doc["causes"])
        thresholds = dict(doc["thresholds"])
        frames = re.compile("|".join(f"(?:{n})" for n in doc["frames"]["names"]))
    except (KeyError, TypeError, re.error) as exc:
        raise DataError(f"profiling/verdicts.yaml: a rule is incomplete or invalid ({exc})") from None
    return Rules(thresholds=thresholds, causes=causes, frames=frames)


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class IdleCause:
    """Idle time of one cause in one scope (a rank's steady state, its whole run, the job)."""
    cause: str  # the rule's key: synchronisation, communication, input, compile, launch, host, ...
    title: str
    idle_ns: int
    gaps: int
    share: float  # of the scope's idle time, 0..1
    activity: str | None = None  # the host event with the most time (or calls) across these gaps
    activity_ns: int = 0


@dataclass(frozen=True)
class StepIdle:
    step: int
    phase: str  # warmup, steady, last
    wall_ns: int
    idle_ns: int
    causes: tuple[tuple[str, int], ...]  # (cause, idle ns), largest first


@dataclass(frozen=True)
class HtaStreamIdle:
    """HTA's idle-time breakdown of one stream (host wait, kernel wait, other), in ns."""
    stream: str
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int


@dataclass(frozen=True)
class RankIdle:
    rank: str
    host: str | None
    span_ns: int
    idle_ns: int
    scope: str  # what `steady` covers: "steps 2-8 (steady state)" or "whole run (no step marks)"
    steady_span_ns: int
    steady_idle_ns: int
    steady: tuple[IdleCause, ...]  # the verdict's basis
    whole: tuple[IdleCause, ...]  # every gap of the run
    phases: tuple[tuple[str, int], ...]  # idle ns per phase (startup, warmup, steady, last, teardown)
    steps: tuple[StepIdle, ...] = ()
    hta: tuple[HtaStreamIdle, ...] = ()
    host_recorded: bool = True  # the trace had host activity (else causes are launch/untraced/unrecorded only)
    program: str = ""  # RankTimeline.program: what the trace says the program is
    step_ranges: tuple[tuple[int, int, int], ...] = ()  # (step, start, end) on the rank's clock


# ---------------------------------------------------------------- steps
def step_ranges(markers: Sequence[Marker]) -> list[tuple[int, int, int]]:
    """(step, start, end) from ProfilerStep#N marks, the side (GPU or CPU) with more steps, a step's
    pieces joined: the same choice as the timeline's per-step rows."""
    sides: dict[bool, dict[int, tuple[int, int]]] = {True: {}, False: {}}
    for marker in markers:
        number = marker.name.rsplit("#", 1)[-1]
        if not number.isdigit():
            continue
        have = sides[marker.on_gpu].get(int(number))
        sides[marker.on_gpu][int(number)] = (marker.start, marker.end) if have is None else \
            (min(have[0], marker.start), max(have[1], marker.end))
    chosen = sides[True] if len(sides[True]) >= len(sides[False]) else sides[False]
    return [(step, *chosen[step]) for step in sorted(chosen)]


def warmup_count(steps: int, limit: int) -> int:
    return min(limit, steps // 4)


# ---------------------------------------------------------------- vectorised interval helpers
def _within_many(blocks: "Intervals", low: "NDArray[np.int64]", high: "NDArray[np.int64]") -> "NDArray[np.int64]":
    """Length of the disjoint sorted `blocks` inside each window [low[i], high[i])."""
    import numpy as np
    start, end = blocks
    if not len(start) or not len(low):
        return np.zeros(len(low), dtype=np.int64)
    done = np.concatenate([[0], np.cumsum(end - start)])

    def covered_until(t: "NDArray[np.int64]") -> "NDArray[np.int64]":
        i = np.searchsorted(start, t, side="right")  # blocks starting at or before t
        last = np.maximum(i - 1, 0)
        partial = np.clip(np.minimum(t, end[last]) - start[last], 0, None)
        return np.where(i > 0, done[last] + partial, 0)
    return covered_until(high) - covered_until(low)


def _matching(names: Sequence[str], pattern: "re.Pattern[str] | None") -> "NDArray[np.bool_]":
    import numpy as np
    if pattern is None:
        return np.zeros(max(len(names), 1), dtype=bool)
    return np.array([bool(pattern.search(n)) for n in names] or [False], dtype=bool)


# ---------------------------------------------------------------- one rank
def analyse_rank(t: RankTimeline, busy: "Intervals | None" = None) -> RankIdle:
    import numpy as np
    r = rules()
    hta = hta_breakdown(t)  # first: its chunks' temporaries never stack on the holes' columns below
    if busy is None:  # the reader's blocks where it made them while parsing, else chunk by chunk
        busy = t.streamed.timeline[2] if t.streamed is not None else busy_union(t)
    t.release_order()  # the last walk in start order: its order need not stay beside the holes' columns
    span_start, span_end = int(busy[0][0]), int(busy[1][-1])
    low, high = busy[1][:-1], busy[0][1:]  # the holes
    length = high - low
    cause = np.full(len(low), -1, dtype=np.int8)  # a rule index per hole (a few dozen rules)
    keys = [c.key for c in r.causes]
    launch_index = keys.index("launch")
    cause[length < int(r["gap_min_ns"])] = launch_index
    activity = t.host_activity
    host_recorded = activity is not None and len(activity.start) > 0
    tops: dict[int, tuple[str | None, int]] = {}
    if activity is not None and host_recorded:
        not_frame = ~_matching(activity.names, r.frames)[activity.name]  # frames name no gap
    for index, rule in enumerate(r.causes):
        open_ = cause < 0
        if not open_.any():
            break
        if rule.rule == "short-gap":
            cause[open_ & (length < int(r["launch_gap_max_ns"]))] = index
            continue
        if rule.rule == "untraced":
            if not host_recorded and not len(t.api_start) and not t.markers:  # no host event at all (no
                cause[open_] = index  # launch call, no range): the rest is not "unrecorded work", it is unseen
            continue
        if rule.rule == "rest":
            cause[open_] = index
            continue
        if activity is None or not host_recorded:
            continue
        if rule.rule == "operator":
            chosen = (activity.category == HOST_OPERATOR) & not_frame
        else:
            chosen = _matching(activity.names, rule.pattern)[activity.name] & not_frame
        if not chosen.any():
            continue
        s, e = activity.start[chosen], activity.end[chosen]
        blocks = _union(s, e)
        if rule.rule == "ends-at-gap":
            tolerance = int(r["sync_tolerance_ns"])
            j = np.searchsorted(blocks[1], low - tolerance, side="left")  # first block ending at/after the gap's start
            valid = j < len(blocks[0])
            jj = np.minimum(j, len(blocks[0]) - 1)
            hit = valid & (blocks[0][jj] < low) & (blocks[1][jj] <= high) & (length <= int(r["sync_gap_max_ns"]))
        else:
            cover = _within_many(blocks, low, high)
            hit = cover >= float(r["cover_min"]) * length
        newly = open_ & hit
        cause[newly] = index
        if newly.any():
            tops[index] = _top_activity(activity.names, activity.name[chosen], s, e, low[newly], high[newly],
                                        by_ends=rule.rule == "ends-at-gap", tolerance=int(r["sync_tolerance_ns"]))
    # phases and steps
    ranges = step_ranges(t.markers)
    warm = warmup_count(len(ranges), int(r["warmup_steps"]))
    # phases as small integer codes (indices into STEP_PHASES): an object array of strings per hole
    # cost seconds per million holes in comparisons
    code = {name: i for i, name in enumerate(STEP_PHASES)}
    phase = np.full(len(low), code["steady"], dtype=np.int8)
    step_of = np.full(len(low) if ranges else 0, -1, dtype=np.int32)  # a column only where steps are marked
    count = len(ranges)
    if ranges:
        # windows: a step runs from its start to the next step's start (the host's time between two
        # steps belongs to the one before); the last step to its own end, then teardown
        starts = np.array([a for _, a, _ in ranges], dtype=np.int64)
        last_end = ranges[-1][2]
        middle = low + length // 2
        position = np.searchsorted(starts, middle, side="right") - 1
        kinds = np.array([code[_step_phase(p, count, warm)] for p in range(count)], dtype=np.int8)
        after = position >= 0
        phase[~after] = code["startup"]
        phase[after] = kinds[np.maximum(position, 0)[after]]
        phase[middle >= last_end] = code["teardown"]
        inside = after & (middle < last_end)
        step_of[inside] = position[inside]
    steady_mask = phase == code["steady"]
    titles = [c.title for c in r.causes]
    whole = _causes(cause, length, np.ones(len(low), dtype=bool), keys, titles, tops)
    steady = _causes(cause, length, steady_mask, keys, titles, tops)
    if count > 1:
        steady_rows = ranges[warm:-1]
        steady_span = (ranges[-1][1] - ranges[warm][1]) if steady_rows else 0
        scope = (f"steps {steady_rows[0][0]}-{steady_rows[-1][0]} (steady state: {warm} warm-up step(s) and the last "
                 "left out)" if steady_rows else "no steady step")
    elif count == 1:
        steady_span = ranges[0][2] - ranges[0][1]
        scope = f"step {ranges[0][0]} (the only step marked)"
    else:
        steady_span = span_end - span_start
        scope = "whole run (the workload marks no steps)"
    steps = []
    if ranges:  # per step and cause in one pass (thousands of steps over millions of gaps)
        counted = step_of >= 0
        per_step = np.bincount(step_of[counted], weights=length[counted], minlength=count)
        per_pair = np.bincount(step_of[counted] * len(keys) + cause[counted], weights=length[counted],
                               minlength=count * len(keys)).reshape(count, len(keys))
        for index, (number, a, b) in enumerate(ranges):
            row = per_pair[index]
            present = np.flatnonzero(row)
            causes_here = sorted(((keys[int(k)], int(row[k])) for k in present), key=lambda kv: -kv[1])
            steps.append(StepIdle(step=number, phase=_step_phase(index, count, warm), wall_ns=b - a,
                                  idle_ns=int(per_step[index]), causes=tuple(causes_here)))
    return RankIdle(rank=t.rank, host=t.host, span_ns=span_end - span_start, idle_ns=int(length.sum()), scope=scope,
                    steady_span_ns=int(steady_span), steady_idle_ns=int(length.sum(where=steady_mask)),
                    steady=steady, whole=whole,
                    phases=tuple((p, int(length.sum(where=phase == code[p]))) for p in STEP_PHASES
                                 if (phase == code[p]).any()),
                    steps=tuple(steps), hta=hta, host_recorded=host_recorded, program=t.program,
                    step_ranges=tuple((int(n), int(a), int(b)) for n, a, b in ranges))


def _step_phase(position: int, count: int, warm: int) -> str:
    if position < warm:
        return "warmup"
    return "last" if position == count - 1 and count > 1 else "steady"


def _top_activity(names: Sequence[str], name: "NDArray[np.int64]", start: "NDArray[np.int64]",
                  end: "NDArray[np.int64]", low: "NDArray[np.int64]", high: "NDArray[np.int64]", by_ends: bool,
                  tolerance: int) -> tuple[str | None, int]:
    """The host event name with the most time across these gaps; for synchronisations (which end
    as a gap begins), the one that ended most often at a gap's start."""
    import numpy as np
    if not len(low):
        return None, 0
    order = np.argsort(low)
    low, high = low[order], high[order]
    if by_ends:
        g = np.searchsorted(low - tolerance, end, side="right") - 1
        ok = (g >= 0) & (end <= high[np.maximum(g, 0)]) & (start < low[np.maximum(g, 0)])
        if not ok.any():
            return None, 0
        counts = np.bincount(name[ok], minlength=len(names))
        best = int(counts.argmax())
        return names[best], int(counts[best])
    overlap = _within_many((low, high), start, end)
    if not (overlap > 0).any():
        return None, 0
    per_name = np.bincount(name, weights=overlap, minlength=len(names))
    best = int(per_name.argmax())
    return names[best], int(per_name[best])


def _causes(cause: "NDArray[Any]", length: "NDArray[np.int64]", mask: "NDArray[np.bool_]", keys: list[str],
            titles: list[str], tops: dict[int, tuple[str | None, int]]) -> tuple[IdleCause, ...]:
    import numpy as np
    every = bool(mask.all())  # no copies of the columns when the scope is every gap
    total = int(length.sum() if every else length.sum(where=mask))  # sums in place: no copies per scope
    rows = []
    for index in np.unique(cause if every else cause[mask]):
        chosen = (cause == index) if every else mask & (cause == index)
        idle = int(length.sum(where=chosen))
        activity, activity_ns = tops.get(int(index), (None, 0))
        rows.append(IdleCause(cause=keys[int(index)], title=titles[int(index)], idle_ns=idle, gaps=int(chosen.sum()),
                              share=idle / total if total else 0.0, activity=activity, activity_ns=activity_ns))
    rows.sort(key=lambda c: -c.idle_ns)
    return tuple(rows)


def merge_causes(groups: Sequence[Sequence[IdleCause]]) -> tuple[IdleCause, ...]:
    """Several ranks' causes as one breakdown (idle times added, shares of the sum)."""
    by_key: dict[str, list[IdleCause]] = {}
    for group in groups:
        for c in group:
            by_key.setdefault(c.cause, []).append(c)
    total = sum(c.idle_ns for group in groups for c in group)
    rows = []
    for key, items in by_key.items():
        top = max(items, key=lambda c: c.activity_ns)
        idle = sum(c.idle_ns for c in items)
        rows.append(IdleCause(cause=key, title=items[0].title, idle_ns=idle, gaps=sum(c.gaps for c in items),
                              share=idle / total if total else 0.0, activity=top.activity,
                              activity_ns=sum(c.activity_ns for c in items if c.activity == top.activity)))
    rows.sort(key=lambda c: -c.idle_ns)
    return tuple(rows)


# ---------------------------------------------------------------- HTA's breakdown, for comparison
HTA_KERNEL_DELAY_NS = 30_000  # HTA's default consecutive_kernel_delay


def hta_breakdown(t: RankTimeline, consecutive_kernel_delay_ns: int = HTA_KERNEL_DELAY_NS,
                  chunk_rows: int = CHUNK_ROWS) -> tuple[HtaStreamIdle, ...]:
    """HTA's get_idle_time_breakdown per stream (HtaStream), the activities given in start order
    chunk by chunk (no column copied whole); the figures the reader made while parsing where it did."""
    if t.streamed is not None and consecutive_kernel_delay_ns == HTA_KERNEL_DELAY_NS:
        return t.streamed.hta
    count = len(t.start)
    if not count:
        return ()
    import numpy as np
    order = t.start_order
    by_id = np.argsort(t.api_correlation, kind="stable") if len(t.api_correlation) else None
    stream = HtaStream((t.api_correlation[by_id], t.api_start[by_id]) if by_id is not None else None,
                       consecutive_kernel_delay_ns)
    for at in range(0, count, chunk_rows):
        part: Any = slice(at, at + chunk_rows) if order is None else order[at:at + chunk_rows]
        stream.add(t.start[part], t.end[part], t.stream[part], t.correlation[part])
    return stream.result(t.streams)


class HtaStream:
    """HTA's idle breakdown per stream: between consecutive GPU activities of a stream (kernels,
    copies, memsets, by start time), the interval is host wait when the next one's launch call began
    after the previous one ended, else kernel wait when shorter than consecutive_kernel_delay, else
    other. Intervals are summed as HTA sums them (a negative interval, an overlap on one stream,
    counts negative). Activities arrive in start order, chunk by chunk; per stream the end of its
    last activity so far is carried."""

    def __init__(self, launches: tuple[Any, Any] | None,
                 consecutive_kernel_delay_ns: int = HTA_KERNEL_DELAY_NS) -> None:
        """`launches`: the launch calls' (correlation ids, starts), sorted by id; None where the
        trace has none."""
        self.delay = consecutive_kernel_delay_ns
        self.api = launches if launches is not None and len(launches[0]) else None
        self.last_end: dict[int, int] = {}
        self.sums: dict[int, list[int]] = {}

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            correlation: "NDArray[Any]") -> None:
        import numpy as np
        launch_start = np.full(len(start), -1, dtype=np.int64)
        api = self.api
        if api is not None:
            where = np.minimum(np.searchsorted(api[0], correlation), len(api[0]) - 1)
            linked = (correlation >= 0) & (api[0][where] == correlation)
            launch_start[linked] = api[1][where[linked]]
        keys = small_distinct(stream)  # one stream throughout: no search per stream below
        for key in keys:
            mine = np.arange(len(stream)) if len(keys) == 1 else np.flatnonzero(stream == key)
            carried = self.last_end.get(key)
            self.last_end[key] = int(end[mine[-1]])
            self.sums.setdefault(key, [0, 0, 0])
            if carried is None:
                prev_end, nxt, launch = end[mine[:-1]], start[mine[1:]], launch_start[mine[1:]]
            else:
                prev_end = np.concatenate([[carried], end[mine[:-1]]])
                nxt, launch = start[mine], launch_start[mine]
            if not len(nxt):
                continue
            interval = nxt - prev_end
            host_wait = (launch >= 0) & (launch > prev_end)
            kernel_wait = ~host_wait & (interval < self.delay)
            other = ~host_wait & ~kernel_wait
            total = self.sums[key]
            total[0] += int(interval.sum(where=host_wait))  # sums in place: no copies per mask
            total[1] += int(interval.sum(where=kernel_wait))
            total[2] += int(interval.sum(where=other))

    def result(self, streams: Sequence[str]) -> tuple[HtaStreamIdle, ...]:
        return tuple(HtaStreamIdle(stream=streams[key], host_wait_ns=host, kernel_wait_ns=kernel, other_ns=other_ns)
                     for key, (host, kernel, other_ns) in sorted(self.sums.items()))


def analyse(parts: Sequence[RankTimeline]) -> tuple[RankIdle, ...]:
    from profilectl.analysis.timeline import combine
    timelines = [t for t in combine(parts) if not t.empty]
    timelines.sort(key=lambda t: (int(t.rank) if t.rank.isdigit() else 1 << 30, t.rank, t.host or ""))
    return tuple(analyse_rank(t) for t in timelines)

