"""One rank's timeline figures from its GPU activity in start order, chunk by chunk (RankStream), as
the whole trace at once would give them, and the feed that passes a reader's batches on in start
order while it parses (StartOrderFeed). Definitions: docs/definitions.md; the module
analysis/timeline.py says what each figure is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from profilectl.model.collectives import collective_names
from profilectl.analysis.intervals import CHUNK_ROWS, BlockStore, UnionStream, blocks_of, depth, gap_min_ns, \
    intersection_length, largest, union
from profilectl.model.timeline import KERNEL, Gap, LaunchStats, RankTimeline, StreamedFigures, TimelineRow, \
    small_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from profilectl.analysis.idle import HtaStream

SHORT_KERNEL_NS = 5_000  # a typical launch call's cost, where a kernel's own launch is not in the trace
TOP_GAPS = 5


def collective_mask(t: RankTimeline) -> "NDArray[np.bool_]":
    """Which events are NCCL/RCCL kernels' (names matched once each, then indexed)."""
    import numpy as np
    if not len(t.name):
        return np.zeros(0, dtype=bool)
    return collective_names(t.names)[t.name]


class RankStream:
    """One rank's timeline figures (TimelineRow, the largest gaps with the activities around them, the
    busy blocks) from its GPU activity given in start order, chunk by chunk, with a small carried state:
    the open block of each union, the furthest end so far, the intervals still open, the top gaps. The
    numbers are those of the whole trace at once (tests/unit/test_timeline_columns.py checks it with
    chunk boundaries inside overlapping intervals).

    `index` (optional, per chunk): each activity's position in the trace as written, where the caller
    sorted it; a gap's `after` is the last activity in that order ending where the gap begins. Chunks
    need end >= start for exactness of the deepest concurrency (analyse_rank checks and otherwise gives
    the trace as one chunk). A boundary may split a run of equal starts: the deepest moment is then
    counted in part at the first chunk's end (fewer open, never more) and whole in the next."""

    def __init__(self, names: Sequence[str], api_start: "NDArray[np.int64] | None" = None,
                 api_end: "NDArray[np.int64] | None" = None,
                 api_correlation: "NDArray[np.int64] | None" = None, capacity: int | None = None) -> None:
        import numpy as np
        self.names = names
        self.collective = np.zeros(0, dtype=bool)  # per name id: a collective's kernel
        self.classified = 0  # name ids `collective` covers
        self.rows = 0
        self.span_start: int | None = None
        self.span_end: int | None = None
        # capacity: the most blocks there can be; its holes are the rank's gaps
        self.busy = UnionStream(keep=True, capacity=capacity, counts_gaps=True)
        self.pieces = UnionStream(keep=False)  # where two or more run at once
        self.comm = UnionStream(keep=True)
        self.compute = UnionStream(keep=False)  # its blocks kept from the first collective on
        # while every activity so far is a compute kernel (a kernel trace without collectives), the
        # compute union is the busy one: it is not made twice, and goes on alone from the first other
        self.compute_is_busy = True
        self.memory = UnionStream(keep=False)
        self.open_ends = np.zeros(0, dtype=np.int64)  # ends of intervals open past the last start seen
        self.ended = 0  # intervals whose end is at or before every start still to come
        self.deepest = 0
        self.streams: set[int] = set()
        self.gap_min = gap_min_ns()  # profiling/verdicts.yaml
        self.holes = 0  # holes between busy blocks so far (the gaps' order, for ties)
        self.top: list[tuple[int, int, int, int, int]] = []  # (-length, order, gap start, after, before)
        self.best: tuple[int, int] = (-1, -1)  # the open block's activity ending at its reach: (index, name)
        # launch statistics: against each kernel's own launch call where linked, else against 5 µs
        self.kernel_ns = self.short_ns = self.short_count = 0
        self.linked = self.linked_short_ns = self.linked_short_count = self.delay_ns = 0
        self.launch_ns = self.linked_kernel_ns = 0
        self.queue: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] = []
        self.api: tuple["NDArray[np.int64]", "NDArray[np.int64]", "NDArray[np.int64]"] | None = None
        if api_correlation is not None and len(api_correlation):
            order = np.argsort(api_correlation, kind="stable")
            self.api = (api_correlation[order], api_start[order], (api_end - api_start)[order])  # type: ignore[index, operator]

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            kind: "NDArray[np.int8]", name: "NDArray[Any]", correlation: "NDArray[np.int64] | None" = None,
            index: "NDArray[Any] | None" = None) -> None:
        import numpy as np
        if not len(start):
            return
        if index is None:
            index = np.arange(self.rows, self.rows + len(start), dtype=np.int64)
        if correlation is None:
            correlation = np.broadcast_to(np.int64(-1), (len(start),))
        self.rows += len(start)
        self._chunk(start, end, stream, kind, name, correlation, index)

    def _chunk(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]", stream: "NDArray[Any]",
               kind: "NDArray[np.int8]", name: "NDArray[Any]", correlation: "NDArray[np.int64]",
               index: "NDArray[Any]") -> None:
        import numpy as np
        first = self.span_start is None
        if first:
            self.span_start = int(s[0])
        top_end = int(e.max())
        self.span_end = top_end if self.span_end is None else max(self.span_end, top_end)
        self.streams.update(small_distinct(stream))
        busy_before = self.busy.state() if self.compute_is_busy else None
        # concurrency: each interval overlaps what came before it from its start to min(its end, the
        # furthest end before it); the union of those pieces is the time with two or more open
        before = self._gaps(s, e, name, index)
        np.minimum(e, before, out=before)
        keep = s < before
        if first:
            keep[0] = False
        self.pieces.add(s[keep], before[keep])
        # the deepest moment is just after some start: the starts up to it less the ends up to it,
        # exact at the last of a run of equal starts. Where two or more are open, the latest in
        # order of those open overlaps an earlier one (`keep`), and no fewer are open just after its
        # start: so the search is made only at the last row of the run of each such start (where a
        # chunk ends inside a run, its last row counts the run so far: a lower bound, and the next
        # chunk counts it whole), and a start that overlaps nothing is 1 deep where it lasts.
        # Where an interval ends before it starts, at every start as before.
        # timsort ("stable"): the ends of start-ordered rows come nearly in order, and it sorts
        # them 6x faster than the default quicksort (7 against 46 ms a million rows, here)
        ends = np.sort(np.concatenate([self.open_ends, e]), kind="stable")
        if bool((e >= s).all()):
            last_of_run = np.append(s[1:] != s[:-1], True)
            if bool(last_of_run.all()):  # starts all distinct: each row is the last of its run
                at = np.flatnonzero(keep)
            else:  # each kept row's run (the last rows before it), then that run's last row
                run = (np.cumsum(last_of_run) - last_of_run)[keep]
                at = np.flatnonzero(last_of_run)[run]  # repeats are harmless to a max
            if bool((e > s).any()):
                self.deepest = max(self.deepest, 1)
        else:
            at = np.arange(len(s))
        del before, keep
        if len(at):
            # rows before this chunk: `add` has counted this one's already
            depth = (self.rows - len(s) + 1 - self.ended) + at - np.searchsorted(ends, s[at], side="right")
            self.deepest = max(self.deepest, int(depth.max()))
            del depth
        closed = int(np.searchsorted(ends, s[-1], side="right"))
        self.ended += closed
        self.open_ends = ends[closed:]
        del at, ends
        # compute, communication, copies
        if self.classified < len(self.names):  # names only grow (ids in order of first appearance)
            fresh = collective_names(self.names[self.classified:])[:len(self.names) - self.classified]
            self.collective = np.concatenate([self.collective[:self.classified], fresh])
            self.classified = len(self.names)
        kernels = kind == KERNEL
        comm = kernels & self.collective[name] if len(name) else kernels
        compute = kernels & ~comm
        every_compute = bool(compute.all())
        if self.compute.store is None and bool(comm.any()):
            # compute blocks matter only where communication may overlap them: a block closed before
            # the first collective started ends before every collective (they come in start order)
            self.compute.store = BlockStore()
        if every_compute and self.compute_is_busy:
            pass  # the busy union (made above) is this one
        elif every_compute:
            self.compute.add(s, e)
        else:
            if self.compute_is_busy:  # the first other activity: the compute union as the busy one stood
                self.compute.resume(busy_before)  # type: ignore[arg-type]  # taken while compute_is_busy
                self.compute_is_busy = False
            self.compute.add(s[compute], e[compute])
            self.comm.add(s[comm], e[comm])
            self.memory.add(s[~kernels], e[~kernels])
        self._launches(s[kernels], e[kernels], correlation[kernels]) if not bool(kernels.all()) else \
            self._launches(s, e, correlation)

    def _gaps(self, s: "NDArray[np.int64]", e: "NDArray[np.int64]", name: "NDArray[Any]",
              index: "NDArray[Any]") -> "NDArray[np.int64]":
        """The busy union's blocks of this chunk (the carried open block as its first interval), and
        the largest holes between them (the union counts them). Returns each row's `before`: the
        furthest end of every row before it (the lowest int64 for the trace's first row), a
        writable array the caller may change."""
        import numpy as np
        carried = self.busy.open
        if carried is not None:  # its reach is the furthest end so far
            s = np.concatenate([[carried[0]], s])
            e = np.concatenate([[carried[1]], e])
            name = np.concatenate([[self.best[1]], name])
            index = np.concatenate([[self.best[0]], index])
        first, last, reach = blocks_of(s, e)
        starts, ends = s[first], reach[last]
        self.busy.closed(starts, ends)
        if carried is not None:
            before = reach[:-1]
        else:
            before = np.empty(len(s), dtype=np.int64)
            before[0] = np.iinfo(np.int64).min
            before[1:] = reach[:-1]

        def ending(block: int) -> tuple[int, int]:
            """(index, name) of the block's activity that ends at its reach, last in the trace's order."""
            a, b = int(first[block]), int(last[block]) + 1
            hit = a + np.flatnonzero(e[a:b] == ends[block])
            if not len(hit):  # the reach is an earlier block's (an activity here ends before it starts)
                hit = a + np.flatnonzero(e[a:b] == e[a:b].max())
            at = int(hit[int(np.argmax(index[hit]))])
            return int(index[at]), int(name[at])
        gap_len = starts[1:] - ends[:-1]
        if len(gap_len):
            # no hole of this chunk enters the top unless its widest is as long as the top's last
            floor = max(self.gap_min, -self.top[-1][0] if len(self.top) == TOP_GAPS else 0)
            if int(gap_len.max()) >= floor:
                for i in largest(gap_len, TOP_GAPS).tolist():
                    if gap_len[i] < self.gap_min:
                        break
                    key = (-int(gap_len[i]), self.holes + i)
                    if len(self.top) == TOP_GAPS and key >= self.top[-1][:2]:
                        break
                    self.top.append((*key, int(ends[i]), ending(i)[1], int(name[first[i + 1]])))
                    self.top.sort()
                    del self.top[TOP_GAPS:]
            self.holes += len(gap_len)
        self.best = ending(len(starts) - 1)
        return before

    def _launches(self, k_start: "NDArray[np.int64]", k_end: "NDArray[np.int64]",
                  k_corr: "NDArray[np.int64]") -> None:
        import numpy as np
        duration = k_end - k_start
        self.kernel_ns += int(duration.sum())
        short = duration < SHORT_KERNEL_NS
        self.short_ns += int(duration[short].sum())
        self.short_count += int(short.sum())
        if self.api is None or not len(k_start) or not (k_corr >= 0).any():
            return
        api_corr, api_start, api_dur = self.api
        at = np.minimum(np.searchsorted(api_corr, k_corr), len(api_corr) - 1)
        linked = (k_corr >= 0) & (api_corr[at] == k_corr)
        if not linked.any():
            return
        launch_start, launch_dur = api_start[at[linked]], api_dur[at[linked]]
        own = duration[linked]
        short = own < launch_dur
        self.linked += int(linked.sum())
        self.linked_short_ns += int(own[short].sum())
        self.linked_short_count += int(short.sum())
        # HTA's launch delay: from the end of the launch call to the kernel's start, never negative
        self.delay_ns += int(np.clip(k_start[linked] - launch_start - launch_dur, 0, None).sum())
        self.launch_ns += int(launch_dur.sum())
        self.linked_kernel_ns += int(own.sum())
        self.queue.append((launch_start, k_end[linked]))

    def finish(self, rank: str, host: str | None
               ) -> tuple[TimelineRow, list[Gap], tuple["NDArray[np.int64]", "NDArray[np.int64]"]]:
        """The rank's row, its largest gaps, and its busy blocks (starts, ends)."""
        import numpy as np
        if self.span_start is None or self.span_end is None:
            raise ValueError("no GPU activity")
        span = self.span_end - self.span_start
        busy = self.busy.length
        names = self.names
        gaps = [Gap(start_ns=at - self.span_start, duration_ns=-negative, after=names[after], before=names[before],
                    rank=rank) for negative, _, at, after, before in self.top]
        if self.linked:
            queue = (np.concatenate([q[0] for q in self.queue]), np.concatenate([q[1] for q in self.queue]))
            depth_mean, depth_max = queue_depth(*queue)
            del queue
            launch = LaunchStats(
                short_kernel_percent=100.0 * self.linked_short_ns / self.linked_kernel_ns if self.linked_kernel_ns
                else 0.0, short_kernels=self.linked_short_count, short_kernel_basis="launch call",
                launch_call_ns=self.launch_ns, launch_delay_mean_ns=self.delay_ns / self.linked,
                queue_depth_mean=depth_mean, queue_depth_max=depth_max)
        else:
            launch = LaunchStats(short_kernel_percent=100.0 * self.short_ns / self.kernel_ns if self.kernel_ns else 0.0,
                                 short_kernels=self.short_count, short_kernel_basis="5 µs", launch_call_ns=0,
                                 launch_delay_mean_ns=None, queue_depth_mean=None, queue_depth_max=None)
        comm_ns = self.comm.length
        hidden = intersection_length(self.comm.blocks(), self.compute.blocks()) \
            if comm_ns and self.compute.store is not None else 0
        busy_percent = 100.0 * busy / span if span else 0.0
        row = TimelineRow(
            rank=rank, host=host, span_ns=span, busy_ns=busy, idle_ns=span - busy, busy_percent=busy_percent,
            gaps=self.busy.gaps, gap_total_ns=self.busy.gap_total, largest_gap_ns=self.busy.largest_hole,
            concurrent_ns=self.pieces.length, max_concurrency=self.deepest, streams=len(self.streams),
            compute_ns=(self.busy if self.compute_is_busy else self.compute).length, communication_ns=comm_ns, hidden_communication_ns=hidden,
            hidden_communication_percent=100.0 * hidden / comm_ns if comm_ns else None,
            memory_ns=self.memory.length, launch=launch,
            launch_bound=(verdict := launch_verdict(busy_percent, launch, busy))[0], verdict=verdict[1])
        return row, gaps, self.busy.blocks()


def analyse_rank(t: RankTimeline, chunk_rows: int = CHUNK_ROWS
                 ) -> tuple[TimelineRow, list[Gap], tuple["NDArray[np.int64]", "NDArray[np.int64]"]]:
    """The rank's row, its gaps, and its busy blocks (starts, ends) for the chart: the columns in
    start order, chunk by chunk (RankStream); a trace already in start order (most are) is read as it
    is, others through the order of a stable sort (no sorted copy of the columns)."""
    import numpy as np
    if t.streamed is not None and chunk_rows == CHUNK_ROWS:
        return t.streamed.timeline
    count = len(t.start)
    order = t.start_order
    if bool((t.end < t.start).any()):
        chunk_rows = max(count, 1)  # an activity ending before it starts: exact only as one chunk
    stream = RankStream(t.names, t.api_start, t.api_end, t.api_correlation, capacity=count)
    for at in range(0, count, chunk_rows):
        if order is None:
            part: "slice | NDArray[Any]" = slice(at, at + chunk_rows)
            index = None
        else:
            part = index = order[at:at + chunk_rows]
        stream.add(t.start[part], t.end[part], t.stream[part], t.kind[part], t.name[part], t.correlation[part],
                   index)
    return stream.finish(t.rank, t.host)


class StartOrderFeed:
    """A rank's activities as a reader parses them (file order, batch by batch) passed on in start
    order to a RankStream and an HtaStream while the parse goes on, so the timeline costs no walk of
    its own afterwards. Rows are held back until a later batch shows that nothing before them is
    still to come: a batch's smallest start is taken as the bound of every later row, which holds
    for traces written in start order or nearly (rocprofv3 writes completions: a few rows out of
    place). Where a later row breaks it, or an activity ends before it starts (exact only as one
    chunk), the feed gives up (`given_up`) and the analyses walk the columns afterwards as before.
    The order passed on is a stable sort's (by start, then position in the file): the same figures."""

    def __init__(self, rank_stream: RankStream, hta: "HtaStream", kind: int) -> None:
        self.rank_stream: RankStream | None = rank_stream
        self.hta: "HtaStream | None" = hta
        self.kind = kind
        self.rows = 0
        self.passed: int | None = None  # the largest start passed on so far
        self.pending: tuple[Any, ...] | None = None  # (start, end, stream, name, correlation, index), sorted

    @property
    def given_up(self) -> bool:
        return self.rank_stream is None

    def give_up(self) -> None:
        self.rank_stream = self.hta = None
        self.pending = None

    def add(self, start: "NDArray[np.int64]", end: "NDArray[np.int64]", stream: "NDArray[Any]",
            name: "NDArray[Any]", correlation: "NDArray[Any]", names: Sequence[str]) -> None:
        """One batch in file order; `names`: the texts of every name id so far (collectives)."""
        import numpy as np
        if self.rank_stream is None or not len(start):
            return
        index = np.arange(self.rows, self.rows + len(start), dtype=np.int64)
        self.rows += len(start)
        low = int(start.min())
        if (self.passed is not None and low < self.passed) or bool((end < start).any()):
            self.give_up()
            return
        self.rank_stream.names = names
        batch: tuple[Any, ...] = (start, end, stream, name, correlation, index)
        held, self.pending = self.pending, None
        if held is not None:
            if int(held[0][-1]) < low:  # in order: the rows held back all go, no copies
                self._pass(held)
            else:
                batch = tuple(np.concatenate([a, b]) for a, b in zip(held, batch))
        if not bool((batch[0][1:] >= batch[0][:-1]).all()):
            order = np.argsort(batch[0], kind="stable")
            batch = tuple(column[order] for column in batch)
        cut = int(np.searchsorted(batch[0], low, side="left"))  # rows before the batch's smallest start
        if cut:
            self._pass(tuple(column[:cut] for column in batch))
        self.pending = tuple(column[cut:] for column in batch)

    def _pass(self, rows: tuple[Any, ...]) -> None:
        import numpy as np
        start, end, stream, name, correlation, index = rows
        assert self.rank_stream is not None and self.hta is not None
        self.rank_stream.add(start, end, stream, np.broadcast_to(np.int8(self.kind), (len(start),)), name,
                             correlation, index)
        self.hta.add(start, end, stream, correlation)
        self.passed = int(start[-1])

    def finish(self, rank: str, host: str | None, names: Sequence[str], streams: Sequence[str]
               ) -> StreamedFigures | None:
        """The figures, with every name and stream text; None where the feed gave up or saw nothing."""
        if self.rank_stream is None or self.hta is None or not self.rows:
            return None
        if self.pending is not None:
            self._pass(self.pending)
            self.pending = None
        self.rank_stream.names = names
        return StreamedFigures(timeline=self.rank_stream.finish(rank, host), hta=self.hta.result(streams))


def queue_depth(launched: "NDArray[np.int64]", finished: "NDArray[np.int64]") -> tuple[float | None, int | None]:
    """The launch queue depth: kernels whose launch call has begun and that have not finished yet,
    over all streams of the rank, averaged over the time from the first launch to the last end.
    Not HTA's queue length, which counts every GPU activity per stream until it starts
    (docs/definitions.md, "Launch queue depth")."""
    import numpy as np
    if not len(launched):
        return None, None
    times, open_ = depth(launched, np.maximum(finished, launched))
    width = np.diff(times)
    total = int(width.sum())
    return (float((width * open_[:-1]).sum() / total) if total else 0.0), int(open_.max())


def launch_verdict(busy_percent: float, launch: LaunchStats, busy_ns: int) -> tuple[bool, str]:
    """Launch-bound: the GPU idles much of the time while its kernels are, in time, mostly shorter
    than launching them, or the queue is nearly always empty."""
    if busy_ns <= 0:
        return False, "no GPU time to judge: the trace's GPU activity has no duration"
    short, depth = launch.short_kernel_percent, launch.queue_depth_mean
    starved = depth is not None and depth < 1.5
    bound = busy_percent < 70.0 and (short >= 30.0 or starved)
    if bound:
        why = f"{short:.0f} % of kernel time is in kernels shorter than their launch" if short >= 30.0 else \
            f"the launch queue holds {depth:.1f} kernels on average"
        text = (f"likely launch-bound: the GPU is busy {busy_percent:.0f} % of the time and {why}; fewer, larger "
                "kernels (fusion, CUDA/HIP graphs, torch.compile) or larger batches would help")
    elif busy_percent < 70.0:
        text = (f"the GPU is busy {busy_percent:.0f} % of the time, but its kernels are not launch-limited: look at "
                "the largest gaps (host work, data loading, synchronisation)")
    else:
        text = f"the GPU is busy {busy_percent:.0f} % of the time"
    return bound, text
