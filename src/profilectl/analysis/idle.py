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
  names only gaps up to `sync_gap_max_ns`), `slow-call` (as covers, with calls of at least
  `slow_call_min_ns` only: a launch that loads code), `short-gap` (shorter
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

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from profilectl.analysis.rules import CauseRule, Rules, rules  # noqa: F401 (CauseRule, rules: re-exported)
from profilectl.analysis.steps import Steps, rank_steps
from profilectl.analysis.intervals import CHUNK_ROWS, busy_union, intersection_length, union
from profilectl.model.timeline import COPY, HOST_OPERATOR, KERNEL, HtaStreamIdle, RankTimeline, small_distinct, \
    sorted_distinct
from profilectl.model.reductions import IdleCause, RankIdle, StepIdle  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Intervals = tuple[NDArray[np.int64], NDArray[np.int64]]

STEP_PHASES = ("startup", "warmup", "steady", "last", "between", "teardown")  # between: host time between two steps


# ---------------------------------------------------------------- results



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
    steps = rank_steps(t)
    span_start, span_end = int(busy[0][0]), int(busy[1][-1])
    # The frame: the GPU's span, widened to the steps' windows. Its holes are every stretch of it the
    # GPU is not busy, its edges included: inside a step, the time before the step's first GPU
    # activity and after its last is idle (docs/definitions.md, "Busy and idle"). The last step of
    # several widens it no further than the GPU's span: a profiler stopped at the program's end
    # closes that step there, over the teardown.
    frame_start, frame_end = span_start, span_end
    if steps:
        judged = steps.windows[:-1] if len(steps.windows) > 1 else steps.windows
        frame_start = min(frame_start, min(w.start for w in steps.windows))
        frame_end = max(frame_end, max(w.end for w in judged))
    low, high = _holes(busy, frame_start, frame_end)
    length = high - low
    cause, tops = _causes_of_holes(t, low, high, length, r)
    keys, titles = [c.key for c in r.causes], [c.title for c in r.causes]
    code = {name: i for i, name in enumerate(STEP_PHASES)}
    whole = _causes(cause, length, np.ones(len(low), dtype=bool), keys, titles, tops)
    if steps:  # the holes cut at the steps' edges: each piece lies in one step (or before, between or after them)
        pieces = _pieces(low, high, steps)
        piece_cause = cause[pieces.hole]
        piece_length = pieces.high - pieces.low
        steady_mask = pieces.phase == code["steady"]
        steady = _causes(piece_cause, piece_length, steady_mask, keys, titles, tops)
        steady_idle = int(np.dot(piece_length, steady_mask))
        phases = tuple((p, int(np.dot(piece_length, pieces.phase == code[p]))) for p in STEP_PHASES
                       if (pieces.phase == code[p]).any())
    else:  # no steps: the whole run is the steady state, each hole one piece (no copies of the holes' columns)
        steady, steady_idle = whole, int(length.sum())
        phases = (("steady", steady_idle),) if len(length) else ()
    steady_windows = steps.steady
    empty = np.zeros(0, dtype=np.int64)
    if steady_windows:
        window = union(np.array([w.start for w in steady_windows], dtype=np.int64),
                        np.array([w.end for w in steady_windows], dtype=np.int64))
        first, last = steady_windows[0].step, steady_windows[-1].step
        scope = (f"step {first} (the only step marked)" if len(steps.windows) == 1 else
                 f"steps {first}-{last} (steady state: {steps.warmup} warm-up step(s) and the last left out)")
    elif steps:
        window, scope = (empty, empty), "no steady step"
    else:
        window = (np.array([span_start], dtype=np.int64), np.array([span_end], dtype=np.int64))
        scope = "whole run (the workload marks no steps)"
    steady_span = int((window[1] - window[0]).sum())
    communication, exposed, copies = _steady_device_time(t, window)
    rows = []
    if steps:  # per step and cause in one pass (thousands of steps over millions of gaps)
        count = len(steps.windows)
        inside = pieces.step >= 0
        per_step = np.bincount(pieces.step[inside], weights=piece_length[inside], minlength=count)
        per_pair = np.bincount(pieces.step[inside] * len(keys) + piece_cause[inside], weights=piece_length[inside],
                               minlength=count * len(keys)).reshape(count, len(keys))
        for index, w in enumerate(steps.windows):
            row = per_pair[index]
            present = np.flatnonzero(row)
            causes_here = sorted(((keys[int(k)], int(row[k])) for k in present), key=lambda kv: -kv[1])
            rows.append(StepIdle(step=w.step, phase=steps.phase(index), wall_ns=w.wall_ns,
                                 idle_ns=int(per_step[index]), causes=tuple(causes_here)))
    return RankIdle(rank=t.rank, host=t.host, span_ns=frame_end - frame_start, idle_ns=int(length.sum()), scope=scope,
                    steady_span_ns=steady_span, steady_idle_ns=steady_idle, steady=steady, whole=whole, phases=phases,
                    steps=tuple(rows), hta=hta, host_recorded=records_host(t),
                    step_ranges=tuple((w.step, w.start, w.end) for w in steps.windows),
                    steady_communication_ns=communication, steady_exposed_communication_ns=exposed,
                    steady_copy_ns=copies, step_source=steps.source, program=t.program)


def _holes(busy: "Intervals", frame_start: int, frame_end: int) -> "Intervals":
    """The non-empty holes of the frame around the busy blocks (disjoint, sorted). Between blocks
    they are views of the blocks' own columns: a union's blocks are apart (one starts after the last
    has ended), so only the frame's two edges can be empty, and a copy of millions of holes (a mask,
    a concatenation: 0.3 s of a 10 M-dispatch report) is made only where an edge is not."""
    import numpy as np
    starts, ends = busy
    low, high = ends[:-1], starts[1:]
    apart = high > low
    if not bool(apart.all()):  # blocks that touch (not a union's): their empty holes dropped
        low, high = low[apart], high[apart]
    del apart
    before, after = frame_start < int(starts[0]), frame_end > int(ends[-1])
    if before or after:
        low = np.concatenate([[frame_start]] * before + [low] + [ends[-1:]] * after).astype(np.int64, copy=False)
        high = np.concatenate([starts[:1]] * before + [high] + [[frame_end]] * after).astype(np.int64, copy=False)
    return low, high


def records_host(t: RankTimeline) -> bool:
    """The trace records host activity (else causes are launch/untraced/unrecorded only)."""
    return t.host_activity is not None and len(t.host_activity.start) > 0


def _causes_of_holes(t: RankTimeline, low: "NDArray[np.int64]", high: "NDArray[np.int64]",
                     length: "NDArray[np.int64]", r: Rules) -> tuple["NDArray[np.int8]", dict[int, tuple[str | None, int]]]:
    """Each hole's cause (an index into the rules: the first rule that explains it) and, per cause,
    the host event with the most time across its holes."""
    import numpy as np
    cause = np.full(len(low), -1, dtype=np.int8)  # a rule index per hole (a few dozen rules)
    keys = [c.key for c in r.causes]
    activity = t.host_activity
    recorded = records_host(t)
    tops: dict[int, tuple[str | None, int]] = {}
    if activity is not None and recorded:
        not_frame = ~_matching(activity.names, r.frames)[activity.name]  # frames name no gap
        # first, short holes the host spends in blocking runtime calls (turns): not launch latency
        for index, rule in enumerate(r.causes):
            if rule.rule == "turns":
                chosen = _matching(activity.names, rule.pattern)[activity.name] & not_frame
                short = length < int(r["launch_gap_max_ns"])
                if chosen.any() and short.any():
                    s, e = activity.start[chosen], activity.end[chosen]
                    hit = short & (_within_many(union(s, e), low, high) >= float(r["cover_min"]) * length)
                    cause[hit] = index
                    if hit.any():
                        tops[index] = _top_activity(activity.names, activity.name[chosen], s, e, low[hit], high[hit],
                                                    by_ends=False, tolerance=0)
    cause[(cause < 0) & (length < int(r["gap_min_ns"]))] = keys.index("launch")
    for index, rule in enumerate(r.causes):
        open_ = cause < 0
        if not open_.any():
            break
        if rule.rule == "turns":  # done above
            continue
        if rule.rule == "short-gap":
            cause[open_ & (length < int(r["launch_gap_max_ns"]))] = index
            continue
        if rule.rule == "untraced":
            if not recorded and not len(t.api_start) and not t.markers:  # no host event at all (no launch
                cause[open_] = index  # call, no range): the rest is not "unrecorded work", it is unseen
            continue
        if rule.rule == "rest":
            cause[open_] = index
            continue
        if activity is None or not recorded:
            continue
        if rule.rule == "operator":
            chosen = (activity.category == HOST_OPERATOR) & not_frame
        else:
            chosen = _matching(activity.names, rule.pattern)[activity.name] & not_frame
            if rule.rule == "slow-call":  # only the calls that took a millisecond or more
                chosen &= (activity.end - activity.start) >= int(r["slow_call_min_ns"])
        if not chosen.any():
            continue
        s, e = activity.start[chosen], activity.end[chosen]
        blocks = union(s, e)
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
    return cause, tops


@dataclass(frozen=True)
class _Pieces:
    """Holes cut at the steps' edges: each piece's hole, bounds, step (-1: in none) and phase code."""
    hole: "NDArray[np.intp]"
    low: "NDArray[np.int64]"
    high: "NDArray[np.int64]"
    step: "NDArray[np.int32]"
    phase: "NDArray[np.int8]"


def _pieces(low: "NDArray[np.int64]", high: "NDArray[np.int64]", steps: Steps) -> _Pieces:
    import numpy as np
    code = {name: i for i, name in enumerate(STEP_PHASES)}
    if not steps:  # one phase: the whole run is the steady state
        return _Pieces(hole=np.arange(len(low)), low=low, high=high, step=np.full(len(low), -1, dtype=np.int32),
                       phase=np.full(len(low), code["steady"], dtype=np.int8))
    windows = steps.windows
    cuts = sorted_distinct(np.array([w.start for w in windows] + [w.end for w in windows], dtype=np.int64))
    first = np.searchsorted(cuts, low, side="right")  # the first cut after a hole's start
    inner = np.maximum(np.searchsorted(cuts, high, side="left") - first, 0)  # cuts strictly inside it
    hole = np.repeat(np.arange(len(low)), inner + 1)
    at = np.arange(len(hole)) - np.repeat(np.cumsum(inner + 1) - (inner + 1), inner + 1)  # position in its hole
    top = len(cuts) - 1
    p_low = np.where(at == 0, low[hole], cuts[np.clip(first[hole] + at - 1, 0, top)])
    p_high = np.where(at == inner[hole], high[hole], cuts[np.clip(first[hole] + at, 0, top)])
    # the window each piece lies in: the latest starting at or before it, if it ends at or after it
    order = np.argsort(np.array([w.start for w in windows], dtype=np.int64), kind="stable")
    starts = np.array([windows[i].start for i in order], dtype=np.int64)
    ends = np.array([windows[i].end for i in order], dtype=np.int64)
    candidate = np.searchsorted(starts, p_low, side="right") - 1
    found = (candidate >= 0) & (p_high <= ends[np.maximum(candidate, 0)])
    step = np.where(found, order[np.maximum(candidate, 0)], -1).astype(np.int32)
    kinds = np.array([code[steps.phase(i)] for i in range(len(windows))], dtype=np.int8)
    phase = np.full(len(hole), code["between"], dtype=np.int8)
    phase[found] = kinds[step[found]]
    phase[~found & (p_high <= starts[0])] = code["startup"]
    phase[~found & (p_low >= ends.max())] = code["teardown"]
    return _Pieces(hole=hole, low=p_low, high=p_high, step=step, phase=phase)


def _steady_device_time(t: RankTimeline, window: "Intervals") -> tuple[int, int, int]:
    """Inside the steady windows: the time NCCL/RCCL kernels run, the part of it that no compute
    kernel runs beside (exposed communication), and the time copies or memsets run."""
    import numpy as np
    from profilectl.model.collectives import collective_names
    if not len(window[0]) or t.empty:
        return 0, 0, 0
    collective = collective_names(t.names)
    communication = exposed = 0
    if bool(collective.any()):
        kernels = t.kind == KERNEL
        on_comm = kernels & collective[t.name]
        if bool(on_comm.any()):
            comm = union(t.start[on_comm], t.end[on_comm])
            compute = union(t.start[kernels & ~on_comm], t.end[kernels & ~on_comm])
            communication = intersection_length(comm, window)
            exposed = communication - intersection_length(intersection(comm, compute), window)
    on_copy = t.kind == COPY
    copies = intersection_length(union(t.start[on_copy], t.end[on_copy]), window) if bool(on_copy.any()) else 0
    return communication, exposed, copies


def intersection(a: "Intervals", b: "Intervals") -> "Intervals":
    """The intervals common to two sets of disjoint sorted intervals."""
    import numpy as np
    if not len(a[0]) or not len(b[0]):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # for each interval of a, the intervals of b that may overlap it: ending after its start, starting before its end
    first = np.searchsorted(b[1], a[0], side="right")
    stop = np.searchsorted(b[0], a[1], side="left")
    count = np.maximum(stop - first, 0)
    which_a = np.repeat(np.arange(len(a[0])), count)
    which_b = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + np.repeat(first, count)
    low = np.maximum(a[0][which_a], b[0][which_b])
    high = np.minimum(a[1][which_a], b[1][which_b])
    keep = high > low
    return low[keep], high[keep]


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
    total = int(length.sum() if every else np.dot(length, mask))  # no copies per scope (dot: exact, and SIMD)
    rows = []
    for index in small_distinct(cause if every else cause[mask]):  # a few rule indices: a count, not a sort
        chosen = (cause == index) if every else mask & (cause == index)
        idle = int(np.dot(length, chosen))
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
        launch_start: "NDArray[np.int64] | None" = None  # none without launch calls: no host wait
        api = self.api
        if api is not None:
            launch_start = np.full(len(start), -1, dtype=np.int64)
            where = np.minimum(np.searchsorted(api[0], correlation), len(api[0]) - 1)
            linked = (correlation >= 0) & (api[0][where] == correlation)
            launch_start[linked] = api[1][where[linked]]
        keys = small_distinct(stream)
        for key in keys:
            if len(keys) == 1:  # one stream throughout (most chunks): the columns themselves, no gather
                mine_start, mine_end, mine_launch = start, end, launch_start
            else:
                mine = np.flatnonzero(stream == key)
                mine_start, mine_end = start[mine], end[mine]
                mine_launch = launch_start[mine] if launch_start is not None else None
            carried = self.last_end.get(key)
            self.last_end[key] = int(mine_end[-1])
            total = self.sums.setdefault(key, [0, 0, 0])
            if carried is None:
                prev_end, nxt = mine_end[:-1], mine_start[1:]
                launch = mine_launch[1:] if mine_launch is not None else None
            else:
                prev_end = np.concatenate([[carried], mine_end[:-1]])
                nxt, launch = mine_start, mine_launch
            if not len(nxt):
                continue
            interval = nxt - prev_end
            kernel_wait = interval < self.delay
            host = 0
            # exact integer sums by a product with the mask (sum(where=) takes no SIMD path: 10x slower);
            # the three kinds part every interval, so "other" is what the first two leave
            if launch is not None:
                host_wait = (launch >= 0) & (launch > prev_end)
                kernel_wait &= ~host_wait
                host = int(np.dot(interval, host_wait))
            kernel = int(np.dot(interval, kernel_wait))
            total[0] += host
            total[1] += kernel
            total[2] += int(interval.sum()) - host - kernel

    def result(self, streams: Sequence[str]) -> tuple[HtaStreamIdle, ...]:
        return tuple(HtaStreamIdle(stream=streams[key], host_wait_ns=host, kernel_wait_ns=kernel, other_ns=other_ns)
                     for key, (host, kernel, other_ns) in sorted(self.sums.items()))


def analyse(parts: Sequence[RankTimeline]) -> tuple[RankIdle, ...]:
    from profilectl.model.timeline import combine
    timelines = [t for t in combine(parts) if not t.empty]
    timelines.sort(key=lambda t: (int(t.rank) if t.rank.isdigit() else 1 << 30, t.rank, t.host or ""))
    return tuple(analyse_rank(t) for t in timelines)

