"""Chrome-trace events as written, for `profilectl merge-trace` (report/merged_trace.py): each
event's fields that the merge rewrites (ph, cat, name, pid, tid, ts, dur, flow id, bp, s), its
`args` carried through as its own bytes (never parsed), in batches streamed from chrome_io's chunks.
The aggregating decoders (chrome_decode) skip `args` but for the few keys they read and keep no flow
id, so the merge cannot use them without changing what it writes; both follow one rule of exact
time (chrome_decode.needs_exact / exact_float) and one chunker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import msgspec

from profilectl.errors import FormatError
from profilectl.formats import chrome_io
from profilectl.formats.chrome_decode import exact_float, needs_exact


class RawEvent(msgspec.Struct, gc=False, omit_defaults=True):
    """One trace event as read and written: the fields rewritten here typed loosely (kineto writes
    pid and tid as numbers or strings), `args` carried through as its own bytes, never parsed."""
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    bp: Any = None
    s: Any = None
    args: msgspec.Raw = msgspec.Raw()  # empty where the event has none (Raw takes no None in a union)


_PLAIN = msgspec.json.Decoder(list[RawEvent])
_EXACT = None  # built on first need: ts kept as text where a double would lose its ns


def _decode(buffer: bytes | bytearray) -> list[RawEvent]:
    """`[` + events + `]`; timestamps exact to the ns (chrome_decode's rule for large clocks)."""
    global _EXACT
    if needs_exact(buffer):
        if _EXACT is None:
            _EXACT = msgspec.json.Decoder(list[RawEvent], float_hook=exact_float)
        return _EXACT.decode(buffer)
    return _PLAIN.decode(buffer)


def iter_events(path: Path) -> Iterator[tuple[list[RawEvent], str]]:
    """Batches of a Chrome trace's events, streamed in chunks, and the document's head (the text
    before the events array: kineto's baseTimeNanoseconds is there or after the array). A chunk cut
    at a false boundary (inside a string) is joined with the next one; a file that does not decode
    to its end is a FormatError naming it."""
    cs = chrome_io
    with cs.open_stream(path) as fh:
        layout, first = cs.find_events(path, fh)
        gz = cs.is_gzip(path)
        size = path.stat().st_size
        tasks = cs.chunk_tasks(path, fh, layout, first, size, cs.CHUNK_MIN, True, seekable=not gz)
        pending: bytearray | None = None
        for task in tasks:
            body = cs.chunk_bytes(task)[1:-1]  # the chunk without the added brackets
            data = body if pending is None else pending + b"," + body
            if task.last:
                events, tail = _last(path, data)
                yield events, layout.head + tail
                cs.check_document(path, layout, tail)
                return
            try:
                events = _decode(b"[" + data + b"]")
            except msgspec.DecodeError:
                pending = data  # a guessed boundary inside a string: decode it with the next chunk
                cs.bound_event(path, len(pending), cs.limit_of("MAX_EVENT_BYTES", cs.MAX_EVENT_BYTES))
                continue
            except msgspec.ValidationError as exc:
                raise FormatError(f"{path}: not a Chrome trace event list: {exc}") from None
            pending = None
            yield events, layout.head
    raise FormatError(f"{path}: not valid JSON (truncated?): the events array does not end")


def _last(path: Path, data: bytes | bytearray) -> tuple[list[RawEvent], str]:
    """The last chunk holds the array's `]` and the document's tail: the `]` is the last one after
    which the text before it decodes as events (tried from the end; a `]` inside the tail fails)."""
    at = len(data)
    for _ in range(64):
        at = data.rfind(b"]", 0, at)
        if at < 0:
            break
        try:
            events = _decode(b"[" + data[:at] + b"]") if data[:at].strip() else []
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        try:
            return events, bytes(data[at + 1:]).decode()
        except UnicodeDecodeError:
            raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None
    raise FormatError(f"{path}: not valid JSON (truncated?): the events array does not end")
