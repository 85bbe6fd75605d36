"""Aggregating a chunk of Chrome-trace events by columns: the same ChunkSums as chrome_aggregate's
per-event loop, without Python code per event (C-level field maps and numpy), for the chunks that
chrome_decode's columnar decoder takes.
"""

from __future__ import annotations

import itertools
import operator
import re
from array import array
from typing import Any

from profilectl.formats.chrome_decode import NO_CORRELATION, collectives_of
from profilectl.formats.chrome_events import (LEGACY_ANNOTATIONS, LEGACY_ROLE, ROLE_OF_CAT, STEP_MARKER,
                                              TREE_ANNOTATION, TREE_KIND, UNLISTED_BY_TORCH, ChunkSums, SumsByName,
                                              ThreadEvents)
from profilectl.formats.torch_shapes import add_calls
from profilectl.formats.torch_shapes import names as shaped_names


# --------------------------------------------------------------------------------------------
# Aggregating a chunk by columns: the same ChunkSums as `aggregate`, without a Python loop per event
#
# The chunk is decoded into strictly typed Structs, tagged by "ph": complete events ("X") with
# strings, floats (NaN where a time is missing) and an integer correlation, every other phase (flows,
# metadata, instants, counters) with no field at all, its keys skipped. Each field comes out as a
# column through C-level map() calls and is grouped with numpy: no Python code runs per event
# (a 16 MB chunk of 30 k events: 18 ms of CPU against 25 ms for the loop, decoding ~10% faster). A chunk
# this decoder refuses (another type anywhere, an event without "ph", the legacy profiler's layout,
# a number past a double's exact integers) goes through `aggregate`: the same numbers (tested).

NO_CORRELATION_TEXT = re.compile(re.escape(str(NO_CORRELATION).encode()))  # `in` would not search a memoryview


def _codes(values: list[Any]) -> tuple[list[Any], Any]:
    """Distinct values in order of first appearance, and each value's index into them."""
    import numpy as np
    distinct = list(dict.fromkeys(values))
    index = {value: i for i, value in enumerate(distinct)}
    return distinct, np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


def _first_seen(codes: Any) -> Any:
    """The distinct codes of a column in order of their first appearance."""
    import numpy as np
    if not len(codes):
        return codes
    distinct, first = np.unique(codes, return_index=True)
    return distinct[np.argsort(first, kind="stable")]


def _intern(codes: Any, distinct: list[Any], known: dict[Any, int], into: list[Any]) -> Any:
    """Codes into `distinct` re-indexed into the list `into` (new values appended in order of first
    appearance, as the general loop appends them)."""
    import numpy as np
    remap = np.zeros(len(distinct), dtype=np.int64)
    for code in _first_seen(codes).tolist():
        value = distinct[code]
        index = known.get(value)
        if index is None:
            index = known[value] = len(into)
            into.append(value)
        remap[code] = index
    return remap[codes]


def _add_sums(table: SumsByName, names: list[str], codes: Any, ns: Any) -> None:
    """[count, total, sum of squares, min, max] per name added into `table`, names new to it in order
    of first appearance. Exact: int64 where no sum can overflow, Python integers where one could."""
    import numpy as np
    if not len(codes):
        return
    order = np.argsort(codes, kind="stable")
    grouped, values = codes[order], ns[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    counts = np.diff(np.r_[starts, len(grouped)])
    largest = int(np.abs(values).max())
    totals = np.add.reduceat(values, starts).tolist()
    lows, highs = np.minimum.reduceat(values, starts).tolist(), np.maximum.reduceat(values, starts).tolist()
    if largest * largest * len(values) < (1 << 63):
        squares = np.add.reduceat(values * values, starts).tolist()
    else:
        bounds = np.r_[starts, len(values)].tolist()
        squares = [sum(v * v for v in values[bounds[k]:bounds[k + 1]].tolist()) for k in range(len(starts))]
    firsts = order[starts]
    for k in np.argsort(firsts, kind="stable").tolist():
        name = names[grouped[starts[k]]]
        have = table.get(name)
        if have is None:
            table[name] = [int(counts[k]), totals[k], squares[k], lows[k], highs[k]]
        else:
            have[0] += int(counts[k])
            have[1] += totals[k]
            have[2] += squares[k]
            have[3] = min(have[3], lows[k])
            have[4] = max(have[4], highs[k])


def _extend(target: array, values: Any) -> None:
    import numpy as np
    target.frombytes(np.ascontiguousarray(values, dtype=np.dtype(target.typecode)).tobytes())


def _shaped_calls(picked: list[Any], rows: list[int], keys: list[Any], key_code: Any, names: list[str],
                  name_code: Any, start: Any, end: Any) -> list[tuple[Any, Any, int, int, str, Any, Any, Any]]:
    """The operator calls among `rows` that carry "Input Dims", as add_calls takes them: the shape
    args as their JSON text (a null or absent one: no shapes)."""
    found = []
    starts, ends = start[rows].tolist(), end[rows].tolist()
    threads, called = key_code[rows].tolist(), name_code[rows].tolist()
    for k, row in enumerate(rows):
        args = picked[row].args
        dims = bytes(args.dims)
        if not dims or dims == b"null":
            continue
        concrete = bytes(args.concrete)
        found.append((*keys[threads[k]], starts[k], ends[k], names[called[k]], dims, bytes(args.types) or b"null",
                      b"" if concrete == b"null" else concrete))
    return found


_CAT = operator.attrgetter("cat")
_NAME, _TS, _DUR = operator.attrgetter("name"), operator.attrgetter("ts"), operator.attrgetter("dur")
_PID, _PID_TID = operator.attrgetter("pid"), operator.attrgetter("pid", "tid")
_CORRELATION = operator.attrgetter("args.correlation")
_COLLECTIVE = operator.attrgetter("args.collective")
_TREE_KIND_BY_ROLE = bytes(TREE_KIND)
_EXACT_DOUBLE = float(1 << 53)


def aggregate_columns(events: list[Any], into: ChunkSums | None = None,
                      text: bytes | bytearray | memoryview | None = None) -> ChunkSums | None:
    """`aggregate` of events from columnar_decoder's decoding (of `text`), by columns. None (nothing
    changed) where the chunk needs the general loop: a duration or time beyond a double's exact
    integers, the legacy profiler's layout, a correlation id spelt like the stand-in for none, a
    collective's args without the chunk's `text` to read them from."""
    import numpy as np
    count = len(events)
    if not LEGACY_ROLE.keys().isdisjoint(set(map(_PID, events))):
        return None
    roles_of_all = list(map(ROLE_OF_CAT.get, map(_CAT, events), itertools.repeat(0)))
    picked = list(itertools.compress(events, roles_of_all))
    m = len(picked)
    dur = np.fromiter(map(_DUR, picked), dtype=np.float64, count=m)
    roles = np.fromiter(itertools.compress(roles_of_all, roles_of_all), dtype=np.uint8, count=m)
    measured = ~np.isnan(dur)  # an event without a duration is not a measurement
    if not measured.all():
        keep = measured.tolist()
        picked = list(itertools.compress(picked, keep))
        roles, dur = roles[measured], dur[measured]
        m = len(picked)
    if m and not np.abs(dur).max() * 1000 < _EXACT_DOUBLE:
        return None
    ns = np.rint(dur * 1000).astype(np.int64)
    ts = np.fromiter(map(_TS, picked), dtype=np.float64, count=m)
    timed = ~np.isnan(ts)
    base_us = 0.0
    if timed.any():
        # integers (epoch µs) are exact below 2**53; differences to the base exact in ns below that too
        base_us = float(int(ts[np.argmax(timed)]))
        if not (np.abs(ts[timed]).max() < _EXACT_DOUBLE and np.abs(ts[timed] - base_us).max() * 1000 < _EXACT_DOUBLE):
            return None
    # Exactly the loop's arithmetic: round((ts - base) * 1000), then the base added back in ns.
    offset = int(base_us) * 1000
    start = np.where(timed, np.rint((np.where(timed, ts, base_us) - base_us) * 1000), 0).astype(np.int64) + offset
    end = start + ns
    names, name_code = _codes(list(map(_NAME, picked)))
    keys, key_code = _codes(list(map(_PID_TID, picked)))
    low = roles & 3
    gpu = np.flatnonzero(timed & ((low == 1) | (low == 2)))
    api = np.flatnonzero(timed & (low == 3))
    if len(gpu) or len(api):
        correlation = np.fromiter(map(_CORRELATION, picked), dtype=np.int64, count=m)
        if (correlation[gpu] == NO_CORRELATION).any() or (correlation[api] == NO_CORRELATION).any():
            if text is None or NO_CORRELATION_TEXT.search(text):
                return None
        api = api[correlation[api] != NO_CORRELATION]

    carrying = any(map(_COLLECTIVE, picked))  # events with a collective's args: the chunk is decoded again
    if carrying and text is None:
        return None

    out = into or ChunkSums()
    out.events += count
    out.untimed += int(m - np.count_nonzero(timed))
    if carrying and text is not None:
        out.collectives.extend(collectives_of(text))
    # recorded with shapes: the calls of the operators the data knows, at the times the timeline has
    wanted = shaped_names()
    known_shapes = np.array([name in wanted for name in names] or [False], dtype=bool)
    operators = np.flatnonzero(timed & ((roles & 4) != 0) & known_shapes[name_code])
    if len(operators):
        add_calls(out, _shaped_calls(picked, operators.tolist(), keys, key_code, names, name_code, start, end))
    for table, which in ((out.kernels, 1), (out.copies, 2), (out.api, 3)):
        rows = np.flatnonzero(low == which)
        _add_sums(table, names, name_code[rows], ns[rows])

    timeline = out.timeline
    if len(gpu):
        streams = [f"{pid}:{tid}" for pid, tid in keys]
        _extend(timeline.start, start[gpu])
        _extend(timeline.end, end[gpu])
        _extend(timeline.stream, _intern(key_code[gpu], streams, {s: i for i, s in enumerate(timeline.streams)},
                                         timeline.streams))
        timeline.kind.extend((low[gpu] - 1).astype(np.uint8).tobytes())
        _extend(timeline.name, _intern(name_code[gpu], names, {s: i for i, s in enumerate(timeline.names)},
                                       timeline.names))
        linked = correlation[gpu]
        _extend(timeline.correlation, np.where(linked == NO_CORRELATION, -1, linked))
    if len(api):
        _extend(timeline.api_start, start[api])
        _extend(timeline.api_end, end[api])
        _extend(timeline.api_correlation, correlation[api])
        _extend(timeline.api_thread, _intern(key_code[api], keys, {k: i for i, k in enumerate(timeline.threads)},
                                             timeline.threads))
    is_step = np.array([name.startswith(STEP_MARKER) for name in names] or [False], dtype=bool)
    marks = np.flatnonzero(timed & ((roles & 80) != 0) & (ns > 0) & is_step[name_code])
    timeline.markers.extend((names[n], a, b, bool(r & 16)) for n, a, b, r in zip(
        name_code[marks].tolist(), start[marks].tolist(), end[marks].tolist(), roles[marks].tolist()))

    listed = np.array([name not in UNLISTED_BY_TORCH for name in names] or [False], dtype=bool)
    tree = np.flatnonzero(timed & ((roles & 8) != 0) & listed[name_code])
    if len(tree):
        tree_names = _intern(name_code[tree], names, {n: i for i, n in enumerate(out.names)}, out.names)
        kinds = np.frombuffer(_TREE_KIND_BY_ROLE, dtype=np.uint8)[roles[tree]]
        legacy = np.array([name.startswith(LEGACY_ANNOTATIONS) for name in names] or [False], dtype=bool)
        kinds = np.where(((roles[tree] & 68) == 68) & legacy[name_code[tree]], TREE_ANNOTATION, kinds).astype(np.uint8)
        thread_of = key_code[tree]
        order = np.argsort(thread_of, kind="stable")
        grouped = thread_of[order]
        bounds = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1], True])
        firsts = order[bounds[:-1]]
        for k in np.argsort(firsts, kind="stable").tolist():
            rows = order[bounds[k]:bounds[k + 1]]
            key = keys[grouped[bounds[k]]]
            thread = out.threads.get(key)
            if thread is None:
                thread = out.threads[key] = ThreadEvents()
            _extend(thread.start, start[tree][rows])
            _extend(thread.end, end[tree][rows])
            _extend(thread.name, tree_names[rows])
            thread.operator.extend(kinds[rows].tobytes())
    return out
