"""torch's operator tree from a Chrome trace's CPU events: per operator and per user annotation
name, calls, total, self time and the GPU time launched inside, as torch's key_averages() counts
them (`tree_sums`), by columns where a thread's events nest strictly, else by torch's own walk.
"""

from __future__ import annotations

import itertools
from array import array
from typing import Any, Callable, Iterable, Iterator

from profilectl.formats.chrome_events import (TREE_ANNOTATION, TREE_OPERATOR, TREE_OTHER, ChunkSums, ThreadEvents,
                                              TimelineEvents)


def operator_sums(partial: ChunkSums) -> dict[str, list[int]]:
    """tree_sums' operators."""
    return tree_sums(partial)[0]


def tree_sums(partial: ChunkSums) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Per operator name, and per user annotation name (record_function, ProfilerStep#N, with a 7th
    value: GPU ns launched inside the range, see _launched_columns): [calls, total ns, self ns, sum of squares, min, max], as torch's
    `key_averages()` counts them.

    torch (torch/autograd/profiler_util.py, EventList) nests each thread's CPU events by time:
    sorted by (start, -end), an event is the child of the innermost open event that contains it.
    `_remove_dup_nodes` then drops an event whose parent has the same name and no other child (an
    op calling itself through the dispatcher, such as aten::scaled_dot_product_attention), and the
    parent adopts its children. key_averages() adds, per name, one call and the event's whole
    duration ("CPU total") for every event that is left, and its self time: its duration less its
    children's durations. Nested events of one name that are not an only child both count, as in
    torch. Settled bottom-up here: an only child of the same name is merged into its parent after
    it merged its own (one step per node reaches torch's fixed point). User annotations are nodes
    of the same tree and counted the same way (key_averages() lists them beside the operators).
    A thread whose events nest strictly is counted by columns (_count_blocks, 2.5x less CPU for
    1 M events), any other by that walk (_walk); both give the same sums, names in the same order.
    """
    import numpy as np
    by_kind: tuple[dict[int, list[int]], ...] = ({}, {}, {})  # by TREE_* kind, then name index
    launched = _launched_columns(partial.timeline)
    for key, thread in partial.threads.items():
        if not len(thread.start):
            continue
        starts, prefix = launched.get(key, (None, None))

        def gpu_between(start: Any, end: Any, starts: Any = starts, prefix: Any = prefix) -> Any:
            if starts is None:
                return np.zeros(len(start), dtype=np.int64)
            return prefix[np.searchsorted(starts, end)] - prefix[np.searchsorted(starts, start)]
        name_width = np.int64 if thread.name.itemsize == 8 else np.int32
        mine: tuple[dict[int, list[int]], ...] = ({}, {}, {})  # this thread's, kept only if every block nests
        if _count_blocks(mine, np.frombuffer(thread.start, dtype=np.int64), np.frombuffer(thread.end, dtype=np.int64),
                         np.frombuffer(thread.name, dtype=name_width), np.frombuffer(bytes(thread.operator),
                                                                                      dtype=np.uint8), gpu_between):
            _add_counts(by_kind, mine)
        else:
            _walk(by_kind, thread, _between(starts, prefix))
    names = partial.names
    return ({names[i]: sums for i, sums in by_kind[TREE_OPERATOR].items()},
            {names[i]: sums for i, sums in by_kind[TREE_ANNOTATION].items()})


TREE_BLOCK = 1 << 18  # events of one thread counted at a time by columns: their temporaries stay small


def _count_blocks(by_kind: tuple[dict[int, list[int]], ...], start: Any, end: Any, name: Any, kind: Any,
                  gpu_between: Any) -> bool:
    """_count_columns over a thread cut into blocks of about TREE_BLOCK events at top-level events
    (those that start after every earlier event has ended: no tree spans two blocks), so memory
    follows the block, not the thread. False where a block does not nest strictly."""
    import numpy as np
    n = len(start)
    if n <= TREE_BLOCK:
        return _count_columns(by_kind, start, end, name.astype(np.int64), kind, gpu_between)
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    if not (end > start).all():
        return False
    # top level: no earlier event (by start) still open; a running maximum of ends, ties aside
    reach = np.maximum.accumulate(end)
    top = np.flatnonzero(np.r_[True, start[1:] >= reach[:-1]])
    at = np.searchsorted(top, np.arange(TREE_BLOCK, n, TREE_BLOCK))
    cuts = [0]
    for position in top[at[at < len(top)]].tolist():
        if position > cuts[-1]:
            cuts.append(position)
    cuts.append(n)
    del reach, top
    for a, b in zip(cuts[:-1], cuts[1:]):
        rows = order[a:b]
        if not _count_columns(by_kind, start[a:b], end[a:b], name[rows].astype(np.int64), kind[rows], gpu_between):
            return False
    return True


def _add_counts(into: tuple[dict[int, list[int]], ...], counts: tuple[dict[int, list[int]], ...]) -> None:
    """One thread's sums added to all threads' (names new to them in the order they were counted)."""
    for mine, theirs in zip(into, counts):
        for index, sums in theirs.items():
            have = mine.get(index)
            if have is None:
                mine[index] = sums
                continue
            for k in (0, 1, 2, 3):
                have[k] += sums[k]
            have[4] = min(have[4], sums[4])
            have[5] = max(have[5], sums[5])
            if len(sums) > 6:
                have[6] += sums[6]


def _walk(by_kind: tuple[dict[int, list[int]], ...], thread: ThreadEvents,
          gpu_between: Callable[[int, int], int]) -> None:
    """tree_sums' counting for one thread by torch's own walk: any nesting, overlaps included."""
    def count(node: list[Any]) -> None:
        """A node torch keeps: one call of its name, its duration and its self time."""
        dur = node[3]
        by_index = by_kind[node[2]]
        sums = by_index.get(node[1])
        if node[2] == TREE_ANNOTATION:
            gpu = gpu_between(node[0] - dur, node[0])
            if sums is None:
                by_index[node[1]] = [1, dur, dur - node[5], dur * dur, dur, dur, gpu]
                return
            sums[6] += gpu
        if sums is None:
            by_index[node[1]] = [1, dur, dur - node[5], dur * dur, dur, dur]
        else:
            sums[0] += 1
            sums[1] += dur
            sums[2] += dur - node[5]
            sums[3] += dur * dur
            if dur < sums[4]:
                sums[4] = dur
            if dur > sums[5]:
                sums[5] = dur

    # One pass in (start, -end) order with a stack of open events; a node is settled when it
    # closes. node: [end, name, is operator, duration, children, children's time, only child].
    starts, ends, name_of, is_op = thread.start, thread.end, thread.name, thread.operator
    stack: list[list[Any]] = []
    for i in itertools.chain(_tree_order(starts, ends), (-1,)):  # -1: the end closes what is open
        if i >= 0:
            start, end = starts[i], ends[i]
        while stack and (i < 0 or start >= stack[-1][0] or end > stack[-1][0]):
            node = stack.pop()
            if node[4] == 1:  # an only child of the same name is merged into its parent
                only = node[6]
                node[6] = None
                if only[1] == node[1]:  # torch's _remove_dup_nodes: adopt its children instead
                    node[4], node[5] = only[4], only[5]
                elif only[2]:
                    count(only)
            if stack:
                parent = stack[-1]
                parent[4] += 1
                parent[5] += node[3]
                if parent[4] == 1:
                    parent[6] = node  # waits: its parent may yet be merged with it
                    continue
                waiting = parent[6]
                if waiting is not None:
                    parent[6] = None
                    if waiting[2]:
                        count(waiting)
            if node[2]:
                count(node)
        if i >= 0:
            stack.append([end, name_of[i], is_op[i], end - start, 0, 0, None])


def _stable_order(*keys: Any) -> Any:
    """Indices sorting by keys[0], then keys[1], ...; ties in index order. Stable sorts from the
    last key to the first (timsort: a thread's events come in long sorted runs)."""
    import numpy as np
    order = np.argsort(keys[-1], kind="stable")
    for key in reversed(keys[:-1]):
        order = order[np.argsort(key[order], kind="stable")]
    return order


def _tree_columns(start: Any, end: Any) -> tuple[Any, Any, Any, Any] | None:
    """torch's nesting of one thread's events without the walk: (order, parent, post-order rank,
    siblings). `order` is torch's (start, -end) order, ties in file order; parent[k] the position (in
    that order) of the innermost open event containing the k-th, -1 for a top-level one; siblings the
    positions grouped by parent. None when the events are not strictly nested (an event of no
    duration, or two that overlap without one containing the other): then only torch's walk
    (tree_sums) gives its answer.

    In strictly nested events of positive duration, the events open when the k-th starts are its
    ancestors, so its depth is k less the events ended by then; its parent is the last event one
    level up before it. The walk builds the same tree when each event lies inside its parent
    (start < parent's end, end <= parent's end) and starts where its previous sibling has ended:
    both checked, so a wrong guess falls back to the walk."""
    import numpy as np
    n = len(start)
    order = np.argsort(start, kind="stable")  # timsort: a thread's events come in a few sorted runs
    start, end = start[order], end[order]
    if (start[1:] == start[:-1]).any():  # events starting together: the longest first
        within = _stable_order(start, -end)
        order, start, end = order[within], start[within], end[within]
    if not (end > start).all():
        return None
    depth = np.arange(n, dtype=np.int64)
    depth -= np.searchsorted(np.sort(end), start, side="right")
    if depth.min() < 0:
        return None
    by_level = np.argsort(depth.astype(np.int32) if depth.max() < (1 << 31) else depth, kind="stable")
    level_key = depth[by_level] * (n + 1) + by_level  # sorted: by depth, then position
    parent = np.full(n, -1, dtype=np.int64)
    inner = np.flatnonzero(depth)
    if len(inner):
        at = np.searchsorted(level_key, (depth[inner] - 1) * (n + 1) + inner) - 1
        if (at < 0).any():
            return None
        candidate = by_level[at]
        del at, level_key, by_level
        if not ((depth[candidate] == depth[inner] - 1) & (start[inner] < end[candidate])
                & (end[inner] <= end[candidate])).all():
            return None
        parent[inner] = candidate
        del candidate
    siblings = np.argsort(parent, kind="stable")
    same = parent[siblings[1:]] == parent[siblings[:-1]]
    if not (end[siblings[:-1][same]] <= start[siblings[1:][same]]).all():
        return None
    size = np.ones(n, dtype=np.int64)
    levels = np.argsort(-depth, kind="stable")  # deepest first: a subtree's size before its parent's
    bounds = np.flatnonzero(np.r_[True, depth[levels][1:] != depth[levels][:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        rows = levels[a:b]
        if depth[rows[0]] == 0:
            break
        np.add.at(size, parent[rows], size[rows])
    return order, parent, np.arange(n, dtype=np.int64) - depth + size - 1, siblings


def _count_columns(by_kind: tuple[dict[int, list[int]], ...], start: Any, end: Any, name: Any, kind: Any,
                   gpu_between: Any) -> bool:
    """tree_sums' counting for one thread, by columns (False: not strictly nested, walk it)."""
    import numpy as np
    tree = _tree_columns(start, end)
    if tree is None:
        return False
    order, parent, post, siblings = tree
    n = len(order)
    start, end, name, kind = start[order], end[order], name[order], kind[order]
    del order
    dur = end - start
    child = np.flatnonzero(parent >= 0)
    children = np.bincount(parent[child], minlength=n)
    children_time = np.zeros(n, dtype=np.int64)
    np.add.at(children_time, parent[child], dur[child])
    # torch's _remove_dup_nodes: an only child of its parent's name goes; the parent takes its children
    dropped = np.zeros(n, dtype=bool)
    dropped[child] = (children[parent[child]] == 1) & (name[child] == name[parent[child]])
    del child
    adopted = np.full(n, -1, dtype=np.int64)
    adopted[parent[dropped]] = np.flatnonzero(dropped)
    last = np.arange(n, dtype=np.int64)
    moving = np.flatnonzero(adopted >= 0)
    while len(moving):  # down a chain of only children of one name, to its last
        last[moving] = adopted[last[moving]]
        moving = moving[adopted[last[moving]] >= 0]
    self_time = dur - children_time[last]
    del last, adopted, children_time
    counted = np.flatnonzero((kind != TREE_OTHER) & ~dropped)
    if not len(counted):
        return True
    # The walk counts a node when it closes, a first child when its second sibling closes, an only
    # child when its parent closes: names are first counted in that order, as the walk inserts them.
    next_sibling = np.full(n, -1, dtype=np.int64)
    same = parent[siblings[1:]] == parent[siblings[:-1]]
    next_sibling[siblings[:-1][same]] = siblings[1:][same]
    first = np.zeros(n, dtype=bool)
    first[siblings[np.r_[True, ~same]]] = True
    # at one close: the closing node's only child, then its parent's waiting first child, then itself
    when = post * 3 + 2
    waits = first & (parent >= 0)
    only = waits & (next_sibling < 0)
    when[only] = post[parent[only]] * 3
    later = waits & (next_sibling >= 0)
    when[later] = post[next_sibling[later]] * 3 + 1
    counted = counted[np.argsort(when[counted], kind="stable")]
    gpu = None
    if (kind[counted] == TREE_ANNOTATION).any():
        gpu = gpu_between(start[counted], end[counted])
    values = (dur[counted], self_time[counted])
    largest = int(np.abs(values[0]).max())
    exact_squares = largest * largest * len(counted) >= (1 << 63)
    for which in (TREE_OPERATOR, TREE_ANNOTATION):
        rows = np.flatnonzero(kind[counted] == which)
        if not len(rows):
            continue
        codes = name[counted][rows]
        group = np.argsort(codes, kind="stable")
        grouped = codes[group]
        bounds = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1], True])
        d, s = values[0][rows][group], values[1][rows][group]
        cuts = bounds[:-1]
        calls = np.diff(bounds).tolist()
        totals, selfs = np.add.reduceat(d, cuts).tolist(), np.add.reduceat(s, cuts).tolist()
        lows, highs = np.minimum.reduceat(d, cuts).tolist(), np.maximum.reduceat(d, cuts).tolist()
        if exact_squares:
            limits = bounds.tolist()
            squares = [sum(v * v for v in d[limits[k]:limits[k + 1]].tolist()) for k in range(len(cuts))]
        else:
            squares = np.add.reduceat(d * d, cuts).tolist()
        gpus = np.add.reduceat(gpu[rows][group], cuts).tolist() if gpu is not None and which == TREE_ANNOTATION \
            else None
        by_index = by_kind[which]
        for k in np.argsort(group[cuts], kind="stable").tolist():
            index = int(grouped[cuts[k]])
            sums = by_index.get(index)
            if sums is None:
                by_index[index] = [calls[k], totals[k], selfs[k], squares[k], lows[k], highs[k]]
                if gpus is not None:
                    by_index[index].append(gpus[k])
                continue
            sums[0] += calls[k]
            sums[1] += totals[k]
            sums[2] += selfs[k]
            sums[3] += squares[k]
            sums[4] = min(sums[4], lows[k])
            sums[5] = max(sums[5], highs[k])
            if gpus is not None:
                sums[6] += gpus[k]
    return True


def _no_gpu(start: int, end: int) -> int:
    return 0


def _between(starts: Any, prefix: Any) -> Callable[[int, int], int]:
    """_launched_columns' sums of one thread as a function (start, end) -> GPU ns, on Python lists (the
    walk calls it per node)."""
    import bisect
    if starts is None:
        return _no_gpu
    begins, sums = starts.tolist(), prefix.tolist()

    def between(start: int, end: int) -> int:
        return sums[bisect.bisect_left(begins, end)] - sums[bisect.bisect_left(begins, start)]
    return between


def _launched_columns(timeline: TimelineEvents) -> dict[tuple[Any, Any], tuple[Any, Any]]:
    """Per launching thread: its runtime calls' starts, sorted, and the running sum (from 0) of the
    GPU ns each launched: the GPU time of calls starting in [a, b) is prefix[bisect(b)] - prefix[bisect(a)].
    That is the GPU ns (kernels, copies, memsets) of the activities whose runtime call
    (cudaLaunchKernel, cudaMemcpyAsync, ...) starts in [a, b) on that thread, linked by correlation
    id: torch counts a range's CUDA time the same way, the device time of what its CPU-side children
    launched."""
    import numpy as np
    if not len(timeline.api_correlation) or not len(timeline.correlation):
        return {}
    corr = np.frombuffer(timeline.correlation, dtype=np.int64)
    duration = np.frombuffer(timeline.end, dtype=np.int64) - np.frombuffer(timeline.start, dtype=np.int64)
    linked = corr >= 0
    order = np.argsort(corr[linked], kind="stable")
    keys, dur = corr[linked][order], duration[linked][order]
    if not len(keys):
        return {}
    unique, first = np.unique(keys, return_index=True)
    per_correlation = np.add.reduceat(dur, first)
    api_corr = np.frombuffer(timeline.api_correlation, dtype=np.int64)
    at = np.minimum(np.searchsorted(unique, api_corr), len(unique) - 1)
    gpu = np.where(unique[at] == api_corr, per_correlation[at], 0)
    api_start = np.frombuffer(timeline.api_start, dtype=np.int64)
    api_thread = np.frombuffer(timeline.api_thread, dtype=np.int64 if timeline.api_thread.itemsize == 8 else np.int32)
    out: dict[tuple[Any, Any], tuple[Any, Any]] = {}
    for index, key in enumerate(timeline.threads):
        mine = api_thread == index
        if not mine.any():
            continue
        by_start = np.argsort(api_start[mine], kind="stable")
        out[key] = (api_start[mine][by_start], np.r_[0, np.cumsum(gpu[mine][by_start])].astype(np.int64))
    return out


def _tree_order(starts: array, ends: array) -> Iterable[int]:
    """Indices in torch's order, (start, -end), ties in file order. A kineto file lists a thread's
    operators by start, then its runtime calls by start: two sorted runs, merged here without an
    index list (memory stays at the arrays); anything less ordered is sorted."""
    n = len(starts)
    breaks = [i for i in range(1, n) if starts[i] < starts[i - 1]
              or (starts[i] == starts[i - 1] and ends[i] > ends[i - 1])]
    if not breaks:
        return range(n)
    if len(breaks) == 1:
        return _merge_two(starts, ends, breaks[0])
    order = sorted(range(n), key=starts.__getitem__)  # stable: file order breaks ties
    _longest_first_on_equal_starts(order, starts, ends)
    return order


def _merge_two(starts: array, ends: array, middle: int) -> Iterator[int]:
    i, j, n = 0, middle, len(starts)
    while i < middle and j < n:
        # the first run wins ties: it comes first in the file
        if starts[j] < starts[i] or (starts[j] == starts[i] and ends[j] > ends[i]):
            yield j
            j += 1
        else:
            yield i
            i += 1
    yield from range(i, middle)
    yield from range(j, n)


def _longest_first_on_equal_starts(order: list[int], starts: array, ends: array) -> None:
    """torch sorts by (start, -end): among events that start together, the longest comes first."""
    i, n = 0, len(order)
    while i < n:
        j = i + 1
        first = starts[order[i]]
        while j < n and starts[order[j]] == first:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=lambda k: -ends[k])
        i = j
