"""Chrome-trace JSON (torch.profiler's export_chrome_trace, `.json` or `.json.gz`), streamed.

The events array is cut into chunks of a few MB at event boundaries, each chunk is decoded and
aggregated on its own (in a process per core for large files), and only running sums come back,
with the 21 bytes per CPU-side event that the operator tree needs (start, end, name, kind): memory
does not follow the JSON's size (a 4.2 GB trace of 10.5 M events peaks at 173 MB per process).

Parsers, chosen by measurement (bench/ingest.py; docs/validation.md), on a 200 k-event torch trace
(80 MB, one core): msgspec decoding into a typed Struct of the 7 fields read here (`args` skipped,
never built) 0.36 s; orjson 0.9 s and the stdlib json 1.7 s (both build every dict of `args`;
4.0 s with the garbage collector on); ijson (yajl2_c) 2.1 s. msgspec is the `fast` extra; without
it the same chunks go through the stdlib json (identical numbers, slower).

With msgspec, a chunk's events come out as columns (aggregate_columns: C-level field maps and numpy,
no Python code per event) and torch's operator tree is built from sorted intervals (_tree_columns);
the per-event loop (`aggregate`) and torch's walk stay for what the columns refuse (odd types, the
legacy profiler's layout, timestamps beyond a double, events that overlap without nesting), with
the same numbers (tests/unit/test_chrome_columns.py).

This module reads a file: the chunks (chrome_io) decoded (chrome_decode) and aggregated
(chrome_columns, else chrome_aggregate) in this process or in workers (chrome_parallel), merged in
file order, and the rest read incrementally from a chunk that does not decode; the operator tree
is chrome_tree's.

Cutting without a second parse: a chunk starts at a known event boundary (the first right after
`"traceEvents": [`) and ends at a guessed one (a `}` followed by `,` and `{`). If `[` + chunk + `]`
decodes completely, the guess was a real boundary: decoding is deterministic from a true start, and
a cut inside a string or a nested object cannot close every bracket. So every chunk that decodes
proves the next chunk's start. From a chunk that does not decode (a bad guess, or a truncated or
broken file) the rest is read by the stdlib's incremental decoder, one event at a time, which
either finds the real boundaries (slower, the same numbers) or names the line where the JSON breaks.
"""

from __future__ import annotations

import codecs
import operator
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

from profilectl.errors import FormatError, ProfilectlError
from profilectl.formats.chrome_aggregate import aggregate, merge_partials
from profilectl.formats.chrome_columns import aggregate_columns
from profilectl.formats.chrome_decode import Undecodable, Values, columnar_decoder, decoder, needs_exact
from profilectl.formats.chrome_events import ChunkSums
from profilectl.formats.chrome_io import (CHUNK_MAX, CHUNK_MIN, Task, check_document, chunk_bytes, chunk_tasks,
                                          find_events, gzip_reader, is_gzip, last_cut, line_at, open_stream,
                                          read_bytes)
from profilectl.formats.chrome_parallel import Ring, forks, gc_paused, pool, slot_bytes, workers_for
from profilectl.formats.torch_memory_events import MEMORY_NAMES, MEMORY_TEXT, memory_events_of


def incremental(path: Path, start: int, at_array_start: bool, into: ChunkSums) -> ChunkSums:
    """Events from a proven boundary to the end of the array, read incrementally: right wherever
    the chunk cuts were wrong, and it names the line where a broken file breaks."""
    utf8 = codecs.getincrementaldecoder("utf-8")()
    with open_stream(path) as fh:
        try:
            fh.seek(start)
        except gzip_reader()[1] as exc:
            raise FormatError(f"{path}: truncated or corrupt gzip file ({exc or type(exc).__name__})") from None

        def more() -> str:
            try:
                return utf8.decode(read_bytes(fh, 8 << 20, path))
            except UnicodeDecodeError:
                raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None

        values = Values(more, start, at_array_start)

        def fail(message: str) -> FormatError:
            return FormatError(f"{path}:{line_at(path, values.offset())}: not valid JSON (truncated?): {message}")

        batch: list[Any] = []
        for event in values.events(fail):
            batch.append(event)
            if len(batch) >= 50_000:
                aggregate(str(path), batch, into)
                batch = []
        aggregate(str(path), batch, into)
        into.tail = values.rest()
    return into



def read_chunk(task: Task) -> ChunkSums:
    """A worker's job: decode one chunk and aggregate it. Undecodable if it does not decode."""
    with gc_paused():
        if task.slot >= 0 and not task.last:
            view = slot_bytes(task)
            return _aggregate_chunk(task.path, view, task.fast, needs_exact(view))
        buffer = chunk_bytes(task)
        exact = needs_exact(buffer)
        if not task.last:
            return _aggregate_chunk(task.path, buffer, task.fast, exact)
        # The last chunk holds the array's end and the document's tail: most of it through the
        # chunk decoder, its last events and the `]` through the incremental reader.
        partial = ChunkSums()
        body_end = len(buffer) - 1
        cut = last_cut(buffer, body_end - task.window) if body_end > 2 * task.window else None
        tail_from = 1
        if cut is not None:
            end, tail_from = cut
            head = buffer[:end + 1]
            head[-1] = 0x5D
            _aggregate_chunk(task.path, head, task.fast, exact, partial)
        try:
            text = bytes(buffer[tail_from:body_end]).decode()
        except UnicodeDecodeError:
            raise Undecodable from None
        values = Values(lambda: "", 0, tail_from == 1, exact)
        values.text = text
        aggregate(task.path, values.events(lambda message: Undecodable()), partial)
        if MEMORY_TEXT.search(text.encode()):
            partial.memory_events.extend(memory_events_of(text.encode()))
        partial.tail = values.rest()
        return partial


def _aggregate_chunk(path: str, data: bytearray | memoryview, fast: bool, exact: bool, into: ChunkSums | None = None) -> ChunkSums:
    """By columns where the chunk's types allow it, else the general decoder and loop; the
    profile_memory events of its text either way."""
    columnar = columnar_decoder() if fast and not exact else None
    done = None
    if columnar is not None:
        events = columnar(data)
        if events is not None:
            done = aggregate_columns(events, into, data)
            # the events' names say whether the text holds memory events: searching it costs more
            if done is not None and MEMORY_NAMES.isdisjoint(map(_NAME, events)):
                return done
    if done is None:
        done = aggregate(path, decoder(fast, exact)(data), into)
    if MEMORY_TEXT.search(data):
        done.memory_events.extend(memory_events_of(data))
    return done


_NAME = operator.attrgetter("name")



def read_trace(path: Path, fast: bool = True, workers: int | None = None, chunk: int | None = None) -> ChunkSums:
    """Every event of a Chrome trace, aggregated: the file is streamed in chunks (of `chunk` bytes;
    default from the size), decoded in `workers` processes (default: one per core for large files),
    merged in file order."""
    gz = is_gzip(path)
    size = path.stat().st_size
    with open_stream(path) as fh:
        layout, first = find_events(path, fh)
        expected = size * 10 if gz else size  # decompressed size unknown: torch traces shrink ~10x
        count = workers if workers is not None else workers_for(expected)
        # gzip: the chunks' bytes travel to the workers, so smaller ones keep memory flat
        chunk = chunk or max(CHUNK_MIN, min(CHUNK_MIN if gz else CHUNK_MAX, expected // max(1, count * 4)))
        ahead = count + 1 if gz else 2 * count  # chunks in flight: the workers never wait, memory stays flat
        # gzip: the chunks go to the workers through shared memory (a slot more than in flight)
        ring = Ring(ahead + 1, chunk + min(1 << 20, chunk) + 2) if gz and count > 1 and forks() else None
        tasks = chunk_tasks(path, fh, layout, first, size, chunk, fast, seekable=not gz, ring=ring)
        failed_at: list[int] = []  # where a chunk did not decode: read on incrementally from there

        def in_process() -> Iterator[ChunkSums]:
            for task in tasks:
                try:
                    yield read_chunk(task)
                except Undecodable:
                    failed_at.append(task.start)
                    return

        def in_workers(executor: Executor) -> Iterator[ChunkSums]:
            in_flight: deque[tuple[Task, Future[ChunkSums]]] = deque()
            for task in tasks:
                in_flight.append((task, executor.submit(read_chunk, task)))
                if len(in_flight) > ahead:
                    yield from _done(in_flight.popleft(), failed_at)
                if failed_at:
                    break
            while in_flight and not failed_at:
                yield from _done(in_flight.popleft(), failed_at)
            for _, future in in_flight:  # drained, never cancelled: cancelling a queued future can hang
                future.exception()  # the pool's shutdown before Python 3.11.5 (gh-94440; Debian 12 has 3.11.2)

        with gc_paused():
            if count <= 1:
                merged = merge_partials(in_process())
            else:
                from concurrent.futures import BrokenExecutor
                try:  # merged as chunks come back, while others decode
                    with pool(count, ring.memory if ring is not None else None) as executor:
                        merged = merge_partials(in_workers(executor))
                except BrokenExecutor:
                    raise ProfilectlError(f"{path}: a process reading it ended abruptly (killed? out of memory?); "
                                          "PROFILECTL_NO_PARALLEL=1 reads it in one process") from None
                finally:  # the pool is shut down: no worker reads the ring any more
                    if ring is not None:
                        ring.memory.close()
    with gc_paused():
        if failed_at:
            merged = incremental(path, failed_at[0], failed_at[0] == layout.events_start, merged)
    doc = check_document(path, layout, merged.tail or "")
    if isinstance(doc, dict):
        merged.top_level = {key: value for key, value in doc.items() if key != "traceEvents"}
    return merged


def _done(item: tuple[Task, "Future[ChunkSums]"], failed_at: list[int]) -> Iterator[ChunkSums]:
    task, future = item
    try:
        yield future.result()
    except Undecodable:
        failed_at.append(task.start)
