"""Interval arithmetic over numpy columns (ns): unions, their lengths inside windows, overlaps,
and unions built chunk by chunk from intervals that arrive in start order. What the timeline, the
idle diagnosis, the stragglers and the merged trace compute with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profilectl.model.timeline import RankTimeline, start_order

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CHUNK_ROWS = 1 << 18  # intervals per chunk of the analysis: its temporaries stay tens of MB at any length


def gap_min_ns() -> int:
    """A hole shorter than this is launch granularity, not a gap (profiling/verdicts.yaml)."""
    from profilectl.analysis.rules import rules
    return int(rules()["gap_min_ns"])


def union(start: "NDArray[np.int64]", end: "NDArray[np.int64]", presorted: bool = False
           ) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """Disjoint, sorted intervals covering the same time (`presorted`: already in start order)."""
    import numpy as np
    if len(start) == 0:
        return start, end
    if presorted:
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    first, last, reach = blocks_of(s, e)
    return s[first], reach[last]


def blocks_of(s: "NDArray[np.int64]", e: "NDArray[np.int64]"
            ) -> tuple["NDArray[np.intp]", "NDArray[np.intp]", "NDArray[np.int64]"]:
    """Of intervals in start order: each block's first and last interval, and the running end."""
    import numpy as np
    reach = np.maximum.accumulate(e)
    # a new block starts where an interval begins after everything before it has ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return first, last, reach


def length(start: "NDArray[np.int64]", end: "NDArray[np.int64]") -> int:
    return int((end - start).sum()) if len(start) else 0


def intersection_length(a: tuple["NDArray[np.int64]", "NDArray[np.int64]"],
                         b: tuple["NDArray[np.int64]", "NDArray[np.int64]"]) -> int:
    """Total overlap of two disjoint sorted interval sets (a sweep over both)."""
    import numpy as np
    if not len(a[0]) or not len(b[0]):
        return 0
    # +1 at each start, -1 at each end, per set; time where both counts are 1
    points = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(len(a[0]), np.int64), -np.ones(len(a[1]), np.int64),
                         np.zeros(len(b[0]) * 2, np.int64)])
    db = np.concatenate([np.zeros(len(a[0]) * 2, np.int64), np.ones(len(b[0]), np.int64),
                         -np.ones(len(b[1]), np.int64)])
    order = np.argsort(points, kind="stable")
    points, da, db = points[order], np.cumsum(da[order]), np.cumsum(db[order])
    both = (da[:-1] > 0) & (db[:-1] > 0)
    return int((np.diff(points) * both).sum())


def depth(start: "NDArray[np.int64]", end: "NDArray[np.int64]") -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """(times, how many intervals are open from each time to the next)."""
    import numpy as np
    points = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((delta, points))  # at equal times, ends (-1) before starts: touching is not overlapping
    return points[order], np.cumsum(delta[order])


class Blocks:
    """Disjoint sorted intervals with their running length: the length inside any window in
    O(log n) (a trace of thousands of steps over millions of kernels stays linear)."""

    def __init__(self, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"]):
        import numpy as np
        self.start, self.end = blocks
        self.done = np.concatenate([[0], np.cumsum(self.end - self.start)])

    def within(self, low: int, high: int) -> int:
        import numpy as np
        first = int(np.searchsorted(self.end, low, side="right"))  # the first block ending after low
        stop = int(np.searchsorted(self.start, high, side="left"))  # blocks starting before high
        if stop <= first:
            return 0
        total = int(self.done[stop] - self.done[first])
        total -= max(0, low - int(self.start[first]))  # the part of the first block before the window
        total -= max(0, int(self.end[stop - 1]) - high)  # the part of the last one after it
        return total


class BlockStore:
    """Closed blocks (starts, ends) as they come: written into arrays sized once where the most there
    can be is known (`capacity`: pages never written are never committed, and no concatenation
    holds them twice), else kept as parts joined at the end."""

    def __init__(self, capacity: int | None = None) -> None:
        import numpy as np
        self.count = 0
        self.buffers = (np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64)) \
            if capacity is not None else None
        self.parts: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] = []

    def append(self, starts: "NDArray[np.int64]", ends: "NDArray[np.int64]") -> None:
        import numpy as np
        if not len(starts):
            return
        if self.buffers is not None and self.count + len(starts) > len(self.buffers[0]):
            self.parts, self.buffers = [self.arrays()], None  # more than the capacity said: parts from here
        if self.buffers is not None:
            self.buffers[0][self.count:self.count + len(starts)] = starts
            self.buffers[1][self.count:self.count + len(ends)] = ends
        else:
            self.parts.append((np.asarray(starts), np.asarray(ends)))
        self.count += len(starts)

    def arrays(self, tail: tuple[int, int] | None = None) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
        """Every block, and `tail` (the open one) after them."""
        import numpy as np
        if tail is not None:
            self.append(np.array([tail[0]], dtype=np.int64), np.array([tail[1]], dtype=np.int64))
        if self.buffers is not None:
            out = self.buffers[0][:self.count], self.buffers[1][:self.count]
        elif len(self.parts) == 1:
            out = self.parts[0]
        else:
            out = (np.concatenate([p[0] for p in self.parts]) if self.parts else np.zeros(0, np.int64),
                   np.concatenate([p[1] for p in self.parts]) if self.parts else np.zeros(0, np.int64))
            self.parts = [out]
        if tail is not None:
            self.count -= 1
            if self.buffers is None:
                self.parts = [(out[0][:-1], out[1][:-1])]
        return out


class UnionStream:
    """The union of intervals that arrive in start order, chunk by chunk: the block still open at the
    end of a chunk is carried (its start and reach) and enters the next chunk as one interval before
    it, so the blocks are exactly those of the whole. Closed blocks are kept (`keep`) or only added up;
    the holes between them are counted only where asked (`counts_gaps`: a timeline's busy union, not
    its concurrency, compute or copy unions, whose holes no one reads)."""

    def __init__(self, keep: bool, capacity: int | None = None, counts_gaps: bool = False) -> None:
        self.open: tuple[int, int] | None = None  # (start, reach) of the block still open
        self.closed_ns = 0
        self.store = BlockStore(capacity) if keep else None
        self.first: int | None = None  # the first block's start
        # holes of gap_min_ns() or more and the largest hole: counted only where counts_gaps (a union
        # resumed from another's state keeps that state's counts, read by no one)
        self.gaps = self.gap_total = self.largest_hole = 0
        self.gap_min = gap_min_ns() if counts_gaps else None

    def add(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]") -> None:
        import numpy as np
        if not len(s):
            return
        if self.open is not None:
            s = np.concatenate([[self.open[0]], s])
            e = np.concatenate([[self.open[1]], e])
        starts, ends = union(s, e, presorted=True)
        self.closed(starts, ends)

    def closed(self, starts: "NDArray[np.int64]", ends: "NDArray[np.int64]") -> None:
        """This chunk's blocks: all but the last are closed, the last stays open."""
        import numpy as np
        if self.first is None:
            self.first = int(starts[0])
        if self.gap_min is not None and len(starts) > 1:
            holes = starts[1:] - ends[:-1]  # between this chunk's blocks, the carried one first
            counted = holes >= self.gap_min
            self.gaps += int(counted.sum())
            self.gap_total += int(np.dot(holes, counted))  # exact: sum(where=) takes no SIMD path
            self.largest_hole = max(self.largest_hole, int(holes.max()))
        self.open = int(starts[-1]), int(ends[-1])
        self.closed_ns += length(starts[:-1], ends[:-1])
        if self.store is not None:
            self.store.append(starts[:-1], ends[:-1])

    @property
    def length(self) -> int:
        return self.closed_ns + (self.open[1] - self.open[0] if self.open is not None else 0)

    def state(self) -> tuple[Any, ...]:
        """What it has added up so far (its kept blocks aside): for `resume`."""
        return self.open, self.closed_ns, self.first, self.gaps, self.gap_total, self.largest_hole

    def resume(self, state: tuple[Any, ...]) -> None:
        """Go on from another union's `state`, as if it had been given the same intervals."""
        self.open, self.closed_ns, self.first, self.gaps, self.gap_total, self.largest_hole = state

    def blocks(self) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
        import numpy as np
        if self.store is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self.store.arrays(self.open)


def largest(values: "NDArray[np.int64]", count: int) -> "NDArray[np.intp]":
    """Indices of the `count` largest values, largest first, ties in index order: what a stable sort
    by descending value gives, without sorting them all."""
    import numpy as np
    if len(values) > 4 * count:
        floor = np.partition(values, len(values) - count)[len(values) - count]
        chosen = np.flatnonzero(values >= floor)  # ties at the floor included, in index order
        return chosen[np.argsort(-values[chosen], kind="stable")][:count]
    return np.argsort(-values, kind="stable")[:count]


def busy_union(t: RankTimeline, chunk_rows: int = CHUNK_ROWS) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """The union of a rank's GPU activity (as union(t.start, t.end)), chunk by chunk in start order:
    no sorted copy of the columns, the blocks written into arrays sized once."""
    return union_in_chunks(t.start, t.end, chunk_rows, t.start_order)


def union_in_chunks(start: "NDArray[np.int64]", end: "NDArray[np.int64]", chunk_rows: int = CHUNK_ROWS,
                     order: "NDArray[Any] | None | bool" = True) -> tuple["NDArray[np.int64]", "NDArray[np.int64]"]:
    """union(start, end) chunk by chunk through a stable sort's order (none where already in order);
    `order`: that order where the caller has it (None: in order), True to make it here."""
    count = len(start)
    if order is True or order is False:
        order = start_order(start)
    union = UnionStream(keep=True, capacity=count)
    for at in range(0, count, chunk_rows):
        part: Any = slice(at, at + chunk_rows) if order is None else order[at:at + chunk_rows]
        union.add(start[part], end[part])
    return union.blocks()
