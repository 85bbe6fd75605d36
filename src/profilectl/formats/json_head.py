"""The top-level keys of a JSON document, read as a stream at a bounded cost: what a file is.

Tools and the harnesses around them put their own keys before the events array: Kineto writes
`schemaVersion`, `deviceProperties` and `distributedInfo` (a gloo job of 300 ranks: 40 kB) before
`traceEvents`; a benchmark harness may write a 26 kB pretty-printed `metadata` object first and
Kineto's keys after the events (AMD-AGI/TraceLens's h100 traces). Looking for a key in the first few
kB misses those; parsing the document reads the whole file. So the document is walked key by key
from its start: each value before the array sought is skipped by a regular-expression scan of its
brackets and strings (no object is built), the scan stops at the array's `[`, and it never reads
more than `limit` bytes. The array's first bytes come with the answer (a reader recognises its
files by their first events: xprof's process names, ...).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

GZIP_MAGIC = b"\x1f\x8b"
RECOGNITION_LIMIT = 16 << 20  # bytes of keys before the events a recogniser reads at most
FIRST_BYTES = 4096  # of the array, given with the answer
SMALL_VALUE = 512  # scalars at most this long are kept (schemaVersion, displayTimeUnit, baseTimeNanoseconds)
_WHITESPACE = b" \t\r\n"
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURE = re.compile(rb'[\[\]{}"]')
_SCALAR = re.compile(rb'[^,}\]\s]+')


@dataclass(frozen=True)
class JsonHead:
    """What the start of a JSON document says. `kind`: "object", "array" (a bare array: Chrome's
    JSON-array format), or "" (not JSON, or not readable). `keys`: the object's top-level keys read,
    in order, up to and including `array_key`, the first of the sought keys whose value is an array
    (None: none came within the limit or before the document's end). `offset`: the byte offset (of
    the decompressed stream) of that array's `[` (of the document's `[` for a bare array). `values`:
    the small scalar values met on the way. `first`: up to FIRST_BYTES bytes after that `[`."""
    kind: str
    keys: tuple[str, ...] = ()
    array_key: str | None = None
    offset: int = -1
    values: dict[str, Any] = field(default_factory=dict)
    first: bytes = b""

    @property
    def found(self) -> bool:
        return self.offset >= 0


class _More(Exception):
    """The text read so far ends inside the token being read."""


class _Scanner:
    """The document's bytes read on demand through `read`, kept from the start (`data`): callers such
    as the Chrome-trace reader go on from where the scan stopped with the bytes already read."""

    def __init__(self, read: Callable[[int], bytes], limit: int) -> None:
        self.read, self.limit = read, limit
        self.data = bytearray()
        self.ended = False
        self.block = 1 << 16  # small first: most files a folder holds are told apart by their first byte

    def more(self) -> None:
        if self.ended or len(self.data) >= self.limit:
            raise _More
        block = self.read(min(self.block, max(1, self.limit - len(self.data))))
        self.block = min(self.block * 2, 1 << 20)
        if not block:
            self.ended = True
            raise _More
        self.data += block

    def at(self, position: int) -> int:
        """The byte at `position` (reading on as needed); -1 at the document's end."""
        while position >= len(self.data):
            try:
                self.more()
            except _More:
                return -1
        return self.data[position]

    def skip_space(self, position: int) -> int:
        while True:
            byte = self.at(position)
            if byte < 0 or byte not in _WHITESPACE:
                return position
            position += 1

    def match(self, pattern: re.Pattern[bytes], position: int) -> re.Match[bytes]:
        """`pattern` matched at `position`, reading on while the match could still grow."""
        while True:
            found = pattern.match(self.data, position)
            if found is not None and found.end() < len(self.data):
                return found
            try:
                self.more()
            except _More:
                if found is None:
                    raise
                return found

    def skip_value(self, position: int) -> int:
        """The position after the JSON value that starts at `position`."""
        first = self.at(position)
        if first == 0x22:  # "
            return self.match(_STRING, position).end()
        if first not in (0x7B, 0x5B):  # { [
            return self.match(_SCALAR, position).end()
        depth, cursor = 0, position
        while True:
            found = _STRUCTURE.search(self.data, cursor)
            if found is None:
                cursor = len(self.data)
                self.more()
                continue
            char = found.group()
            if char == b'"':
                cursor = self.match(_STRING, found.start()).end()
                continue
            depth += 1 if char in b"[{" else -1
            cursor = found.end()
            if depth == 0:
                return cursor


def scan(read: Callable[[int], bytes], sought: tuple[str, ...] = ("traceEvents",),
         limit: int = RECOGNITION_LIMIT) -> tuple[JsonHead, bytearray]:
    """The head of the document `read` gives, and every byte read so far (the scan's position is
    JsonHead.offset: the caller goes on from there)."""
    scanner = _Scanner(read, limit)
    try:
        start = scanner.skip_space(0)
        opening = scanner.at(start)
    except _More:
        return JsonHead(""), scanner.data
    if opening == 0x5B:  # [
        return JsonHead("array", offset=start, first=_first(scanner, start)), scanner.data
    if opening != 0x7B:  # {
        return JsonHead(""), scanner.data
    keys: list[str] = []
    values: dict[str, Any] = {}
    position = start + 1
    try:
        while True:
            position = scanner.skip_space(position)
            byte = scanner.at(position)
            if byte in (0x7D, -1):  # } or the end: the document ended before any sought array
                return JsonHead("object", tuple(keys), values=values), scanner.data
            if byte != 0x22:
                return JsonHead("", tuple(keys)), scanner.data
            token = scanner.match(_STRING, position)
            key = json.loads(token.group())
            keys.append(key)
            position = scanner.skip_space(token.end())
            if scanner.at(position) != 0x3A:  # :
                return JsonHead("", tuple(keys)), scanner.data
            position = scanner.skip_space(position + 1)
            if key in sought and scanner.at(position) == 0x5B:
                return JsonHead("object", tuple(keys), key, position, values, _first(scanner, position)), scanner.data
            end = scanner.skip_value(position)
            if end - position <= SMALL_VALUE and scanner.at(position) not in (0x7B, 0x5B):
                try:
                    values[key] = json.loads(bytes(scanner.data[position:end]))
                except ValueError:
                    return JsonHead("", tuple(keys)), scanner.data
            position = scanner.skip_space(end)
            byte = scanner.at(position)
            if byte == 0x2C:  # ,
                position += 1
            elif byte not in (0x7D, -1):
                return JsonHead("", tuple(keys)), scanner.data
    except (_More, re.error):
        # the limit, or a document cut short: an object whose sought array did not come (yet)
        return JsonHead("object", tuple(keys), values=values), scanner.data
    except UnicodeDecodeError:
        return JsonHead(""), scanner.data


def _first(scanner: _Scanner, bracket: int) -> bytes:
    scanner.at(bracket + FIRST_BYTES)  # reads on up to there where the document is that long
    return bytes(scanner.data[bracket + 1:bracket + 1 + FIRST_BYTES])


def open_document(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped when it is gzip (by its magic bytes, not its name)."""
    fh: IO[bytes] = open(path, "rb")
    if fh.read(2) == GZIP_MAGIC:
        fh.close()
        import gzip
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]  # a binary file object
    fh.seek(0)
    return fh


def head_of(path: Path) -> JsonHead:
    """The head of the JSON document in `path` (gzip or not), looking for "traceEvents"; cached per
    file version: every registered reader asks about every file of a folder."""
    try:
        stat = path.stat()
    except OSError:
        return JsonHead("")
    return _cached_head(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _cached_head(path: Path, _size: int, _mtime_ns: int) -> JsonHead:
    import zlib
    try:
        with open_document(path) as fh:
            return scan(fh.read)[0]
    except (OSError, EOFError, zlib.error):
        return JsonHead("")
