"""Aggregating decoded Chrome-trace events, one event at a time (`aggregate`: the general path,
for every decoder's events and any type or layout), and merging the Partials of chunks in file
order (`merge_partials`). chrome_columns does the same by columns where a chunk's types allow it,
with the same numbers.
"""

from __future__ import annotations

from array import array
from typing import Any, Iterable

from profilectl.formats import chrome_decode
from profilectl.formats.chrome_decode import collective_values, nanoseconds
from profilectl.formats.chrome_events import (GPU_MARKERS, LEGACY_ANNOTATIONS, LEGACY_ROLE, MISSING, ROLE, STEP_MARKER,
                                              TREE_ANNOTATION, TREE_KIND, UNLISTED_BY_TORCH, ChunkSums, SumsByName,
                                              ThreadEvents, remapped)
from profilectl.formats.torch_shapes import add_calls


def _shaped_names() -> frozenset[str]:
    from profilectl.formats.torch_shapes import names
    return names()


def aggregate(path: str, events: Iterable[Any], into: ChunkSums | None = None) -> ChunkSums:
    """Sums per name of kernels, copies and runtime/driver calls, and the CPU events of each
    thread. The hottest loop of a trace read: kept flat on purpose (no calls per event)."""
    out = into or ChunkSums()
    tables: tuple[SumsByName, ...] = ({}, out.kernels, out.copies, out.api)
    names, threads = out.names, out.threads
    name_index: dict[str, int] = {n: i for i, n in enumerate(names)}
    role_of = ROLE.get
    unset = chrome_decode.UNSET  # msgspec.UNSET once a msgspec decoder was made (it made these events)
    legacy_role_of = LEGACY_ROLE.get  # a local: a name imported from a module is called through LOAD_ATTR
    tree_kind = TREE_KIND
    unlisted = UNLISTED_BY_TORCH
    # One thread's events in plain lists (appending to a list is cheaper than to an array).
    columns: dict[tuple[Any, Any], tuple[list[int], list[int], list[int], list[int]]] = {}
    last_key: Any = None
    starts: list[int] = []
    ends: list[int] = []
    name_ids: list[int] = []
    operators: list[int] = []
    # Timestamps become integer ns relative to the chunk's first one: the difference of two
    # nearby doubles is exact, so 3 decimals of a 13-digit microsecond timestamp survive.
    base_us: float | None = None
    # The timeline's events of this call, in plain lists too; starts relative to base_us like above.
    gpu_start: list[int] = []
    gpu_end: list[int] = []
    gpu_stream: list[int] = []
    gpu_kind: list[int] = []
    gpu_name: list[int] = []
    gpu_corr: list[int] = []
    api_start: list[int] = []
    api_end: list[int] = []
    api_corr: list[int] = []
    api_thread: list[int] = []
    thread_index: dict[tuple[Any, Any], int] = {k: i for i, k in enumerate(out.timeline.threads)}
    launcher: tuple[Any, Any] = (MISSING, MISSING)
    tix = -1
    markers: list[tuple[str, int, int, bool]] = []
    collectives: list[tuple[bool, str, int, int, tuple[Any, ...]]] = []
    shaped: list[tuple[Any, Any, int, int, str, Any, Any, Any]] = []
    shaped_names = _shaped_names()
    timeline = out.timeline
    stream_index: dict[str, int] = {n: i for i, n in enumerate(timeline.streams)}
    gpu_name_index: dict[str, int] = {n: i for i, n in enumerate(timeline.names)}
    count = untimed = 0
    for event in events:
        count += 1
        if event.ph != "X":
            continue
        role = role_of(event.cat)
        if role is None:
            if event.cat in GPU_MARKERS:
                role = 16  # a range on the GPU (ProfilerStep#N ranges on the GPU timeline)
            else:
                role = legacy_role_of(event.pid) if type(event.pid) is str else None
                if role is None:
                    continue
        dur = event.dur
        if type(dur) is float and dur - dur == 0.0:
            ns = round(dur * 1000)
        elif dur is MISSING or dur is unset:
            continue  # as before: an event without a duration is not a measurement
        else:
            ns = nanoseconds(path, event, dur, "dur")
        name = event.name
        if type(name) is not str:
            name = str(name)
        if role & 3:
            table = tables[role & 3]
            sums = table.get(name)
            if sums is None:
                table[name] = [1, ns, ns * ns, ns, ns]
            else:
                sums[0] += 1
                sums[1] += ns
                sums[2] += ns * ns
                if ns < sums[3]:
                    sums[3] = ns
                elif ns > sums[4]:
                    sums[4] = ns
        ts = event.ts
        if ts is None:  # counted in the tables; without a time it has no place on a timeline or tree
            untimed += 1
            continue
        if type(ts) is float and ts - ts == 0.0:
            if base_us is None:
                base_us = float(int(ts))
            start = round((ts - base_us) * 1000)
        else:  # an exact number (exact_float's text, an integer): integer ns all the way
            exact_ns = nanoseconds(path, event, ts, "ts")
            if base_us is None:
                base_us = float(exact_ns // 1000)
            start = exact_ns - int(base_us) * 1000
        low = role & 3
        if low == 1 or low == 2:  # a kernel, copy or memset on the GPU timeline
            stream = f"{event.pid}:{event.tid}"
            sid = stream_index.get(stream)
            if sid is None:
                sid = stream_index[stream] = len(timeline.streams)
                timeline.streams.append(stream)
            gid = gpu_name_index.get(name)
            if gid is None:
                gid = gpu_name_index[name] = len(timeline.names)
                timeline.names.append(name)
            gpu_start.append(start)
            gpu_end.append(start + ns)
            gpu_stream.append(sid)
            gpu_kind.append(low - 1)
            gpu_name.append(gid)
            args = event.args
            corr = args.correlation if args is not None else None
            gpu_corr.append(corr if type(corr) is int else -1)
        elif low == 3:
            args = event.args
            corr = args.correlation if args is not None else None
            if type(corr) is int:
                api_start.append(start)
                api_end.append(start + ns)
                api_corr.append(corr)
                if event.tid != launcher[1] or event.pid != launcher[0]:  # mostly one thread launches
                    launcher = (event.pid, event.tid)
                    known = thread_index.get(launcher)
                    if known is None:
                        known = thread_index[launcher] = len(timeline.threads)
                        timeline.threads.append(launcher)
                    tix = known
                api_thread.append(tix)
        if role & 80 and ns > 0 and name.startswith(STEP_MARKER):
            markers.append((name, start, start + ns, bool(role & 16)))
        if low == 1 or role & 8:
            args = event.args
            if args is not None and args.collective is not None:
                collectives.append((low == 1, name, start, start + ns, collective_values(args)))
            if role & 4 and args is not None and args.dims is not None and name in shaped_names:
                shaped.append((event.pid, event.tid, start, start + ns, name, args.dims, args.types, args.concrete))
        if role & 8 and name not in unlisted:
            key = (event.pid, event.tid)
            if key != last_key:
                lists = columns.get(key)
                if lists is None:
                    lists = columns[key] = ([], [], [], [])
                starts, ends, name_ids, operators = lists
                last_key = key
            index = name_index.get(name)
            if index is None:
                index = name_index[name] = len(names)
                names.append(name)
            starts.append(start)
            ends.append(start + ns)
            name_ids.append(index)
            # role 4|64: torch 1.8/1.9's "Operator", which held the record_function ranges too
            operators.append(TREE_ANNOTATION if role & 68 == 68 and name.startswith(LEGACY_ANNOTATIONS)
                             else tree_kind[role])
    offset = int(base_us or 0) * 1000
    for key, (starts, ends, name_ids, operators) in columns.items():
        thread = threads.get(key)
        if thread is None:
            thread = threads[key] = ThreadEvents()
        thread.start.extend(array("q", starts) if not offset else array("q", [s + offset for s in starts]))
        thread.end.extend(array("q", ends) if not offset else array("q", [e + offset for e in ends]))
        thread.name.extend(array("l", name_ids))
        thread.operator.extend(operators)
    shift = (lambda values: array("q", [v + offset for v in values])) if offset else (lambda values: array("q", values))
    timeline.start.extend(shift(gpu_start))
    timeline.end.extend(shift(gpu_end))
    timeline.stream.extend(array("l", gpu_stream))
    timeline.kind.extend(gpu_kind)
    timeline.name.extend(array("l", gpu_name))
    timeline.correlation.extend(array("q", gpu_corr))
    timeline.api_start.extend(shift(api_start))
    timeline.api_end.extend(shift(api_end))
    timeline.api_correlation.extend(array("q", api_corr))
    timeline.api_thread.extend(array("l", api_thread))
    timeline.markers.extend((name, a + offset, b + offset, gpu) for name, a, b, gpu in markers)
    out.collectives.extend((gpu, name, a + offset, b + offset, values) for gpu, name, a, b, values in collectives)
    add_calls(out, [(pid, tid, a + offset, b + offset, *rest) for pid, tid, a, b, *rest in shaped])
    out.events += count
    out.untimed += untimed
    return out


def merge_partials(parts: Iterable[ChunkSums]) -> ChunkSums:
    """Chunks in file order: sums added, thread events appended with names re-indexed."""
    out = ChunkSums()
    index: dict[str, int] = {}
    for part in parts:
        for mine, theirs in ((out.kernels, part.kernels), (out.copies, part.copies), (out.api, part.api)):
            for name, sums in theirs.items():
                have = mine.get(name)
                if have is None:
                    mine[name] = list(sums)
                else:
                    have[0] += sums[0]
                    have[1] += sums[1]
                    have[2] += sums[2]
                    have[3] = min(have[3], sums[3])
                    have[4] = max(have[4], sums[4])
        remap = []
        for name in part.names:
            if name not in index:
                index[name] = len(out.names)
                out.names.append(name)
            remap.append(index[name])
        for key, events in part.threads.items():
            thread = out.threads.get(key)
            if thread is None:
                thread = out.threads[key] = ThreadEvents()
            thread.start.extend(events.start)
            thread.end.extend(events.end)
            if remap == list(range(len(remap))):
                thread.name.extend(events.name)
            else:
                thread.name.extend(remapped(events.name, remap))
            thread.operator.extend(events.operator)
        out.timeline.extend(part.timeline)
        out.collectives.extend(part.collectives)
        out.memory_events.extend(part.memory_events)
        out.shaped.extend(part.shaped)
        out.events += part.events
        out.untimed += part.untimed
        if part.tail is not None:
            out.tail = part.tail
    return out
