"""Opening a Chrome trace and cutting its events array into chunks: the file's bytes (gunzipped on
the fly, by python-isal where installed, within bounds on hostile input), where the events array
starts (find_events), the guessed boundaries between events, and the chunks as Tasks (a plain
file's byte ranges, or a gzip stream's bytes in their own buffers or the workers' shared ring);
the text around the array checked to complete a JSON document.

Cutting without a second parse: a chunk starts at a known event boundary (the first right after
`"traceEvents": [`) and ends at a guessed one (a `}` followed by `,` and `{`). If `[` + chunk + `]`
decodes completely, the guess was a real boundary: decoding is deterministic from a true start, and
a cut inside a string or a nested object cannot close every bracket. So every chunk that decodes
proves the next chunk's start (formats/chrome_stream.py reads on incrementally from one that does not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # imported where used: `profilectl env-check` loads this module and needs none
    import mmap

from profilectl import settings
from profilectl.errors import FormatError
from profilectl.formats.chrome_decode import Undecodable
from profilectl.formats.chrome_parallel import Ring, slot_bytes

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_MIN, CHUNK_MAX = 4 << 20, 16 << 20
HEAD_LIMIT = 64 << 20  # how far the top-level keys before traceEvents are read
# Bounds on hostile or broken input, each with its environment variable (a number; 0 lifts it):
# - a .json.gz inflating beyond this many times its own size is refused (torch traces inflate ~10x;
#   1 MB of gzip holding 1 GiB of whitespace is 1000x), checked once LIMIT_FLOOR bytes are out;
# - no event boundary within this many bytes: an event this large, or not a trace at all;
# - nesting deeper than this inside one event (Python's JSON decoder would recurse past its limit).
MAX_INFLATE_RATIO = 100
MAX_INFLATED_BYTES = 256 << 30
INFLATE_CHECK_FLOOR = 64 << 20
MAX_EVENT_BYTES = 256 << 20


def limit_of(name: str, default: int) -> int:
    from profilectl.files import env_limit
    return env_limit(name, default)


def open_stream(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped on the fly when it is gzip (by magic bytes, not by name), within
    the inflation bounds above."""
    try:
        fh: IO[bytes] = open(path, "rb")
        if fh.read(2) == GZIP_MAGIC:
            fh.close()
            return _bounded_gzip(path)
        fh.seek(0)
        return fh
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None


def gzip_reader() -> tuple[Any, tuple[type[BaseException], ...]]:
    """The gzip file class, and what it raises on a truncated or corrupt file. python-isal's igzip
    where installed (a dependency; PROFILECTL_NO_ISAL=1 leaves it out): 2 M events, 45 MB of gzip
    inflating to 805 MB, 0.23 s of CPU against 0.85 s for the stdlib's gzip (zlib-ng 0.28 s)."""
    import gzip
    import zlib
    errors: tuple[type[BaseException], ...] = (EOFError, gzip.BadGzipFile, zlib.error)
    if not settings.get_bool("PROFILECTL_NO_ISAL"):
        try:
            from isal import igzip, isal_zlib
        except ImportError:
            pass
        else:
            return igzip.IGzipFile, (*errors, getattr(isal_zlib, "error"))  # its stub types it as an instance
    return gzip.GzipFile, errors


def _bounded_gzip(path: Path) -> IO[bytes]:
    reader, _ = gzip_reader()
    ratio, most = limit_of("MAX_INFLATE_RATIO", MAX_INFLATE_RATIO), limit_of("MAX_INFLATED_BYTES", MAX_INFLATED_BYTES)
    packed = max(1, path.stat().st_size)
    limit = min(most, max(INFLATE_CHECK_FLOOR, ratio * packed))

    class Bounded(reader):  # type: ignore[valid-type,misc]  # a GzipFile class (the stdlib's or python-isal's)
        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            if self.tell() > limit:
                why = (f"more than {most} bytes (PROFILECTL_MAX_INFLATED_BYTES)" if limit == most else
                       f"more than {ratio}x its {packed} bytes (PROFILECTL_MAX_INFLATE_RATIO)")
                raise FormatError(f"{path}: refused: it inflates to {why}; raise the limit to read it")
            return data
    return Bounded(path, "rb")  # type: ignore[no-any-return,unused-ignore]  # Any where isal is untyped


def is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError:
        return False


def read_bytes(fh: IO[bytes], size: int, path: Path | str) -> bytes:
    try:
        return fh.read(size)
    except gzip_reader()[1] as exc:
        raise FormatError(f"{path}: truncated or corrupt gzip file ({exc or type(exc).__name__})") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


WHITESPACE = frozenset(b" \t\r\n")


def _next_cut(data: bytes | bytearray | mmap.mmap, start: int, stop: int | None = None) -> tuple[int, int] | None:
    """(end of one event, start of the next) of the first `}` `,` `{` separator at or after start
    (and before `stop`: the data's end unless given)."""
    stop = len(data) if stop is None else stop
    while True:
        comma = data.find(b",", start, stop)
        if comma < 0:
            return None
        before = comma - 1
        while before >= 0 and data[before] in WHITESPACE:
            before -= 1
        after = comma + 1
        while after < stop and data[after] in WHITESPACE:
            after += 1
        if before >= 0 and data[before] == 0x7D and after < stop and data[after] == 0x7B:  # } and {
            return before + 1, after
        start = comma + 1


def last_cut(data: bytes | bytearray, before: int) -> tuple[int, int] | None:
    """The last separator whose `{` is before `before`."""
    position = before
    while position > 0:
        brace = data.rfind(b"{", 0, position)
        if brace <= 0:
            return None
        back = brace - 1
        while back >= 0 and data[back] in WHITESPACE:
            back -= 1
        if back >= 0 and data[back] == 0x2C:  # ,
            back -= 1
            while back >= 0 and data[back] in WHITESPACE:
                back -= 1
            if back >= 0 and data[back] == 0x7D:
                return back + 1, brace
        position = brace
    return None


@dataclass(frozen=True)
class Layout:
    """Where the events array starts in the (decompressed) stream, and the text before it."""
    events_start: int
    head: str
    array_document: bool  # the file is a bare array of events, not {"traceEvents": [...]}


def find_events(path: Path, fh: IO[bytes]) -> tuple[Layout, bytes]:
    """The layout, and the bytes already read past the array's `[`: the document's top-level keys
    walked in order up to "traceEvents" (formats/json_head.py), so a key's value that holds the text
    `"traceEvents": [` (a harness's metadata) is not taken for the array."""
    from profilectl.formats import json_head
    head, data = json_head.scan(lambda size: read_bytes(fh, size, path), limit=HEAD_LIMIT)
    if head.found:
        at = head.offset + 1
        if head.kind == "array":
            return Layout(at, "", True), bytes(data[at:])
        try:
            text = data[:head.offset].decode()
        except UnicodeDecodeError:
            raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None
        return Layout(at, text, False), bytes(data[at:])
    stripped = data.lstrip()
    if not stripped:
        raise FormatError(f"{path}: empty file, not a Chrome trace")
    if stripped[:1] not in (b"{", b"["):
        raise FormatError(f"{path}: not a Chrome trace: not a JSON object or array")
    raise FormatError(f"{path}: not a Chrome trace: no traceEvents list")


def check_document(path: Path, layout: Layout, tail: str) -> Any:
    """The text around the events array must complete a JSON document (a file cut after the events,
    or one with trailing garbage, is as broken as one cut inside them): that document, its events
    array left empty."""
    try:
        doc = json.loads(layout.head + "[]" + tail)
    except RecursionError:
        raise FormatError(f"{path}: refused: the text after the events is nested deeper than Python's JSON "
                          "decoder follows") from None
    except ValueError as exc:
        raise FormatError(f"{path}: not valid JSON after the events (truncated?): "
                          f"{getattr(exc, 'msg', exc)}") from None
    if layout.array_document and doc != []:
        raise FormatError(f"{path}: not a Chrome trace")
    if not layout.array_document and not (isinstance(doc, dict) and doc.get("traceEvents") == []):
        raise FormatError(f"{path}: not a Chrome trace: no traceEvents list")
    return doc


def line_at(path: Path, offset: int) -> int:
    """1-based line number of a byte offset of the (decompressed) stream: for error messages only."""
    line, done = 1, 0
    with open_stream(path) as fh:
        while done < offset:
            block = read_bytes(fh, min(1 << 24, offset - done), path)
            if not block:
                break
            line += block.count(b"\n")
            done += len(block)
    return line


@dataclass(frozen=True)
class Task:
    """One chunk: `[start, end)` of the stream, or its bytes (gzip: workers cannot seek in it) as
    `[` + the chunk + `]`, ready to decode: in `data`, or at offset `slot` of the shared ring (Ring)."""
    path: str
    start: int
    end: int
    data: bytearray | None
    last: bool
    fast: bool
    window: int = 1 << 20  # the last chunk's final part read incrementally
    slot: int = -1  # where `[` + the chunk + `]` is in the ring, or -1


def chunk_bytes(task: Task) -> bytearray:
    """`[` + the chunk + `]` in one buffer."""
    if task.slot >= 0:
        return bytearray(slot_bytes(task))
    if task.data is not None:
        return task.data
    else:
        buffer = bytearray(task.end - task.start + 2)
        with open(task.path, "rb") as fh:
            fh.seek(task.start)
            view = memoryview(buffer)[1:-1]
            got = 0
            while got < len(view):
                n = fh.readinto(view[got:])
                if not n:
                    raise Undecodable  # the file shrank while it was read
                got += n
    buffer[0], buffer[-1] = 0x5B, 0x5D
    return buffer


def chunk_tasks(path: Path, fh: IO[bytes], layout: Layout, first: bytes, size: int, chunk: int,
           fast: bool, seekable: bool, ring: Ring | None = None) -> Iterator[Task]:
    """Chunks of about `chunk` bytes, cut at guessed event boundaries, in file order. A plain file
    is only sampled here (a window at each cut); the workers read the chunks themselves. A stream
    (gzip) is read here, its chunks copied into `ring` where given, else into their own buffers."""
    name = str(path)
    start = layout.events_start
    probe = min(1 << 20, chunk)  # how much is read around each cut
    longest = limit_of("MAX_EVENT_BYTES", MAX_EVENT_BYTES)
    if seekable:
        while True:
            target = start + chunk
            if target + probe >= size:
                yield Task(name, start, size, None, True, fast, probe)
                return
            fh.seek(target)
            window = read_bytes(fh, probe, path)
            cut = _next_cut(window, 0)
            while cut is None and target + len(window) < size:  # one event longer than the window
                window += read_bytes(fh, probe, path)
                cut = _next_cut(window, 0)
                bound_event(path, len(window), longest)
            if cut is None:
                yield Task(name, start, size, None, True, fast, probe)
                return
            yield Task(name, start, target + cut[0], None, False, fast, probe)
            start = target + cut[1]
    if ring is not None:
        yield from _ring_tasks(path, fh, first, start, chunk, probe, fast, longest, ring)
        return
    buffer = bytearray(first)
    eof = False
    while True:
        while not eof and len(buffer) < chunk + probe:
            more = read_bytes(fh, 4 << 20, path)
            eof = not more
            buffer += more
        cut, eof = _read_to_cut(path, fh, buffer, chunk, probe, eof, longest)
        if cut is None:
            yield Task(name, start, start + len(buffer), _bracketed(buffer, len(buffer)), True, fast, probe)
            return
        yield Task(name, start, start + cut[0], _bracketed(buffer, cut[0]), False, fast, probe)
        start += cut[1]
        del buffer[:cut[1]]


def _ring_tasks(path: Path, fh: IO[bytes], first: bytes, start: int, chunk: int, probe: int, fast: bool,
                longest: int, ring: Ring) -> Iterator[Task]:
    """chunk_tasks of a stream, inflated straight into the ring's slots: `[`, the bytes left after the
    last cut, the stream up to `chunk` + `probe` bytes, cut at the first boundary after `chunk`, `]`
    written over the separator. An event longer than a slot takes the general way (its own buffer)."""
    name, memory, room = str(path), ring.memory, ring.slot_size - 2
    carry, eof = first, False
    while True:
        base = ring.next_slot()
        body = base + 1
        buffer: bytearray | None = None
        filled = len(carry)
        if filled <= room:
            memory[base] = 0x5B
            memory[body:body + filled] = carry
            while not eof and filled < room:
                more = read_bytes(fh, room - filled, path)  # one read: smaller ones cost more (1 MB: 1.5x)
                eof = not more
                memory[body + filled:body + filled + len(more)] = more
                filled += len(more)
            if filled < room:  # the stream's end: the last chunk
                memory[body + filled] = 0x5D
                yield Task(name, start, start + filled, None, True, fast, probe, base)
                return
            cut = _next_cut(memory, body + chunk, body + filled)
            if cut is not None:
                memory[cut[0]] = 0x5D  # over the separator after the event's `}`
                carry = memory[cut[1]:body + filled]
                yield Task(name, start, start + cut[0] - body, None, False, fast, probe, base)
                start += cut[1] - body
                continue
            buffer = bytearray(memory[body:body + filled])
        # an event longer than the slot's spare room (or a head longer than a slot)
        buffer = buffer if buffer is not None else bytearray(carry)
        found, eof = _read_to_cut(path, fh, buffer, chunk, probe, eof, longest)
        if found is None:
            yield Task(name, start, start + len(buffer), _bracketed(buffer, len(buffer)), True, fast, probe)
            return
        yield Task(name, start, start + found[0], _bracketed(buffer, found[0]), False, fast, probe)
        start += found[1]
        carry = bytes(buffer[found[1]:])


def _read_to_cut(path: Path, fh: IO[bytes], buffer: bytearray, chunk: int, probe: int, eof: bool,
                 longest: int) -> tuple[tuple[int, int] | None, bool]:
    """The first event boundary after `chunk` bytes of buffer, reading on into it `probe` bytes at a
    time until one comes or the stream ends (None then), and whether it has ended; an event longer
    than `longest` is refused."""
    cut = _next_cut(buffer, chunk) if len(buffer) >= chunk + probe else None
    while cut is None and not eof:
        more = read_bytes(fh, probe, path)
        eof = not more
        buffer += more
        cut = _next_cut(buffer, chunk)
        bound_event(path, len(buffer) - chunk, longest)
    return cut, eof


def _bracketed(buffer: bytearray, end: int) -> bytearray:
    """`[` + buffer[:end] + `]`, copied once."""
    out = bytearray(end + 2)
    out[0], out[-1] = 0x5B, 0x5D
    with memoryview(buffer) as view:
        out[1:-1] = view[:end]
    return out


def bound_event(path: Path, searched: int, longest: int) -> None:
    if searched > longest:
        raise FormatError(f"{path}: refused: no boundary between events within {longest} bytes (an event that "
                          "large, or not a trace); raise PROFILECTL_MAX_EVENT_BYTES to read it")
