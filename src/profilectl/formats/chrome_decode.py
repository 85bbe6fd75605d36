"""Decoding a chunk of Chrome-trace JSON (`[` + events + `]`) into events: the one place where
Chrome JSON becomes Python values. msgspec's typed decoder of the 7 fields read (and the args of
collectives and shapes), the columnar decoder (strictly typed events, tagged by phase, for
chrome_columns), the decoder of a chunk's collectives only, the stdlib json fallback (the same
events, slower), and the incremental reader of events from a proven boundary (Values). One rule of
exact time for all of them: where a timestamp is past a double's ns (epoch µs with fractions),
numbers are kept as their text (exact_float) and turned into integer ns by `nanoseconds`.
formats/chrome_raw.py decodes the same chunks for the merged trace, with the same rule.
"""

from __future__ import annotations

import json
import re
import sys
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, Callable, Iterator, NamedTuple, Union

from profilectl.errors import FormatError
from profilectl.formats.chrome_events import COLLECTIVE_ARGS, MISSING, ROLE_OF_CAT, Event
from profilectl.formats.torch_shapes import SHAPE_ARGS

UNSET: Any = MISSING  # msgspec.UNSET once msgspec is loaded (an event without "dur")


class Undecodable(Exception):
    """A chunk that the chunk decoder could not read: re-read it incrementally from its start."""


def _msgspec_decoder(exact: bool = False) -> Callable[[bytes | bytearray | memoryview], list[Any]] | None:
    try:
        import msgspec
    except ImportError:
        return None

    # defstruct, not a class body: this module's annotations are strings (PEP 563) and msgspec
    # would look for a name it cannot see. `args` and the other keys are skipped, never built.
    event_args = msgspec.defstruct("EventArgs", [("correlation", Any, None),
                                                 *((field, Any, None) for field, _ in COLLECTIVE_ARGS + SHAPE_ARGS)],
                                   gc=False, rename=dict(COLLECTIVE_ARGS + SHAPE_ARGS))
    trace_event = msgspec.defstruct("TraceEvent", [
        ("ph", Any, None), ("cat", Any, None), ("name", Any, "?"), ("pid", Any, 0), ("tid", Any, 0),
        ("ts", float | str | None, None), ("dur", float | str | None | msgspec.UnsetType, msgspec.UNSET),
        ("args", event_args | None, None)], gc=False)
    typed = msgspec.json.Decoder(list[trace_event])  # type: ignore[valid-type]
    if exact:  # ts as the literal's text where a double would lose its fraction (exact_float)
        exact_event = msgspec.defstruct("ExactTraceEvent", [
            ("ph", Any, None), ("cat", Any, None), ("name", Any, "?"), ("pid", Any, 0), ("tid", Any, 0),
            ("ts", Any, None), ("dur", float | str | None | msgspec.UnsetType, msgspec.UNSET),
            ("args", event_args | None, None)], gc=False)
        typed = msgspec.json.Decoder(list[exact_event], float_hook=exact_float)  # type: ignore[valid-type]
    global UNSET
    UNSET = msgspec.UNSET

    def decode(data: bytes | bytearray | memoryview) -> list[Any]:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            # an odd type somewhere (a string ts): the general path decides
            return _stdlib_decode_exact(data) if exact else _stdlib_decode(data)
        except msgspec.DecodeError:
            raise Undecodable from None
    return decode


def _stdlib_decode(data: bytes | bytearray | memoryview, parse_float: Callable[[str], Any] = float) -> list[Any]:
    try:
        items = json.loads(bytes(data) if isinstance(data, memoryview) else data, parse_float=parse_float)
    except (ValueError, RecursionError):
        raise Undecodable from None
    return [Event(e.get("ph"), e.get("cat"), e.get("name", "?"), e.get("pid", 0), e.get("tid", 0),
                  e.get("ts"), e.get("dur", MISSING), _Args.of(e.get("args")))
            for e in items if isinstance(e, dict)]


def _stdlib_decode_exact(data: bytes | bytearray | memoryview) -> list[Any]:
    return _stdlib_decode(data, exact_float)


# Exact time. A double holds a µs timestamp to the ns only below 2**43 µs (its spacing there is
# ~1 ns): relative clocks (torch 2.x on CUDA, 4.4e12) are exact, epoch µs with ns fractions (HTA's
# ns_resolution_trace, 1.7e15, spacing 0.25 µs) are not. A chunk whose first timestamp is that
# large and that holds a fraction is decoded with such numbers kept as their text (exact_float),
# turned into integer ns by nanoseconds: no float round trip. Other chunks take the fast path.
FIRST_TS = re.compile(rb'"ts"\s*:\s*"?(-?\d+)')
LARGE_FRACTION_TS = re.compile(rb'"ts"\s*:\s*"?-?\d{13,}\.')
EXACT_BELOW = 1 << 43


def exact_float(text: str) -> Any:
    """A JSON number as a float where the float is exact to the ns, else its text."""
    value = float(text)
    return value if -EXACT_BELOW < value < EXACT_BELOW else text


def needs_exact(chunk: bytes | bytearray | memoryview) -> bool:
    first = FIRST_TS.search(chunk)
    return first is not None and abs(int(first.group(1))) >= EXACT_BELOW and LARGE_FRACTION_TS.search(chunk) is not None


class _Args(NamedTuple):
    """The stdlib path's form of the msgspec EventArgs struct."""
    correlation: Any
    collective: Any = None
    pg_name: Any = None
    pg_id: Any = None
    pg_desc: Any = None
    seq: Any = None
    seq_lower: Any = None
    in_nelems: Any = None
    out_nelems: Any = None
    group_size: Any = None
    dtype: Any = None
    group_ranks: Any = None
    dims: Any = None  # SHAPE_ARGS: an operator recorded with shapes (formats/torch_shapes.py)
    types: Any = None
    concrete: Any = None

    @staticmethod
    def of(value: Any) -> "_Args | None":
        if not isinstance(value, dict) or ("correlation" not in value and "Collective name" not in value
                                           and "Input Dims" not in value):
            return None
        return _Args(value.get("correlation"), *(value.get(key) for _, key in COLLECTIVE_ARGS + SHAPE_ARGS))


_DECODERS: dict[tuple[bool, bool], Callable[[bytes | bytearray | memoryview], list[Any]]] = {}


def decoder(fast: bool = True, exact: bool = False) -> Callable[[bytes | bytearray | memoryview], list[Any]]:
    """msgspec's typed decoder where installed (and `fast`), else the stdlib json; `exact`: large
    timestamps kept as text (needs_exact)."""
    if (fast, exact) not in _DECODERS:
        _DECODERS[fast, exact] = (_msgspec_decoder(exact) if fast else None) or (
            _stdlib_decode_exact if exact else _stdlib_decode)
    return _DECODERS[fast, exact]



def nanoseconds(path: str, event: Any, value: Any, what: str) -> int:
    """Microseconds (Chrome traces) to integer nanoseconds. Integers keep totals exact whatever the
    chunking; a number's text (exact_float) is converted digit by digit, with no float between."""
    if type(value) is int:
        return value * 1000
    if isinstance(value, str):
        integer_part, dot, fraction = value.strip().partition(".")
        digits = integer_part.lstrip("-")
        if digits.isdigit() and (not dot or fraction.isdigit()) and len(fraction) <= 3:
            magnitude = int(digits) * 1000 + int(fraction.ljust(3, "0") if fraction else 0)
            return -magnitude if integer_part.startswith("-") else magnitude
        try:
            exact = Decimal(value)
        except InvalidOperation:
            exact = None
        if exact is not None and exact.is_finite():
            return int((exact * 1000).to_integral_value(ROUND_HALF_EVEN))
    number = value
    if isinstance(number, str):
        try:
            number = float(number)
        except ValueError:
            number = None
    if not isinstance(number, (int, float)) or number - number != 0:  # also NaN and infinities
        raise FormatError(f"{path}: event {event.name!r} has a non-numeric {what} {value!r}")
    whole = int(number)
    return whole * 1000 + round((number - whole) * 1000)



def collective_values(args: Any) -> tuple[Any, ...]:
    """An event's COLLECTIVE_ARGS values (msgspec's struct or the stdlib path's _Args)."""
    return tuple(getattr(args, field) for field, _ in COLLECTIVE_ARGS)


_COLLECTIVE_DECODER: list[Any] = []


def collectives_of(text: bytes | bytearray | memoryview) -> list[tuple[bool, str, int, int, tuple[Any, ...]]]:
    """ChunkSums.collectives of a chunk that the columns read (their decoder keeps only args.correlation,
    so that the many chunks without a collective pay nothing for them): the chunk decoded once more,
    into the args of COLLECTIVE_ARGS only, times exact (numbers as their text, to ns by nanoseconds).
    The same events and values as `aggregate` takes."""
    import msgspec
    if not _COLLECTIVE_DECODER:
        args = msgspec.defstruct("CollectiveArgs", [(name, Any, None) for name, _ in COLLECTIVE_ARGS],
                                 gc=False, rename=dict(COLLECTIVE_ARGS))
        event = msgspec.defstruct("CollectiveEvent", [("ph", Any, None), ("cat", Any, None), ("name", Any, "?"),
                                                      ("ts", Any, None), ("dur", Any, None), ("args", Any, None)],
                                  gc=False)
        _COLLECTIVE_DECODER.extend((msgspec.json.Decoder(list[event], float_hook=str).decode,  # type: ignore[valid-type]
                                    msgspec.convert, args))
    decode, convert, args_type = _COLLECTIVE_DECODER
    found = []
    role_of = ROLE_OF_CAT.get  # a local: a name imported from a module is called through LOAD_ATTR
    for event in decode(text):
        role = role_of(event.cat, 0) if type(event.cat) is str else 0
        if event.ph != "X" or not (role & 3 == 1 or role & 8) or not isinstance(event.args, dict) \
                or "Collective name" not in event.args or event.ts is None or event.dur is None:
            continue
        start = nanoseconds("", event, event.ts, "ts")
        found.append((role & 3 == 1, str(event.name), start, start + nanoseconds("", event, event.dur, "dur"),
                      collective_values(convert(event.args, args_type))))
    return found


# The columnar decoder (chrome_columns.aggregate_columns reads its events)
NO_CORRELATION = -(1 << 63)  # an event without args.correlation (a chunk spelling it goes the general way)
_NOT_COMPLETE = "\0"  # the "cat" of every phase but "X": no role
# Chrome's trace event format: every phase it defines (one Struct each: msgspec tags by value)
PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "O", "N", "D", "M", "R",
          "c", "(", ")", "V", "v")
INSTANT_PHASES = ("i", "I")


def _columnar_decoder() -> Callable[[bytes | bytearray | memoryview], list[Any] | None] | None:
    """list of strictly typed events, or None where the chunk needs the general path."""
    try:
        import msgspec
    except ImportError:
        return None
    nan = float("nan")
    # "Collective name" only says whether the event carries a collective's args (collectives_of reads
    # them); the shape args stay their JSON text, a span of the chunk (torch_shapes.add_calls decodes
    # each distinct text once), so a chunk recorded with shapes is decoded once, not twice
    column_args = msgspec.defstruct("ColumnArgs", [("correlation", int, NO_CORRELATION), ("collective", Any, None),
                                                   *((field, msgspec.Raw, msgspec.Raw()) for field, _ in SHAPE_ARGS)],
                                    gc=False, frozen=True, rename={"collective": "Collective name", **dict(SHAPE_ARGS)})
    complete = msgspec.defstruct("CompleteEvent", [
        ("cat", str, ""), ("name", str, "?"), ("pid", int | str, 0), ("tid", int | str, 0),
        ("ts", float, nan), ("dur", float, nan), ("args", column_args, column_args())],
        gc=False, tag_field="ph", tag="X")
    # instants keep their name: profile_memory's "[memory]" events are instants (one name lookup per
    # chunk then says whether its text needs searching for them)
    others = [msgspec.defstruct(f"Phase{i}", [("name", Any, None)] if phase in INSTANT_PHASES else [], gc=False,
                                tag_field="ph", tag=phase,
                                namespace={"cat": _NOT_COMPLETE, "pid": None,
                                           **({} if phase in INSTANT_PHASES else {"name": None})})
              for i, phase in enumerate(PHASES)]
    event: Any = Union.__getitem__((complete, *others))
    typed = msgspec.json.Decoder(list[event])

    def decode(data: bytes | bytearray | memoryview) -> list[Any] | None:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            return None  # an odd type somewhere: the general decoder and loop decide
        except msgspec.DecodeError:
            raise Undecodable from None
    return decode


_COLUMNAR: list[Any] = []


def columnar_decoder() -> Callable[[bytes | bytearray | memoryview], list[Any] | None] | None:
    if not _COLUMNAR:
        _COLUMNAR.append(_columnar_decoder())
    return _COLUMNAR[0]


def _event(value: dict[str, Any]) -> Event:
    return Event(value.get("ph"), value.get("cat"), value.get("name", "?"), value.get("pid", 0),
                 value.get("tid", 0), value.get("ts"), value.get("dur", MISSING), _Args.of(value.get("args")))


class Values:
    """The stdlib's incremental reading of the events array from a proven boundary: one object at a
    time (raw_decode), text refilled from `more()` as it runs out. Ends at the array's `]`."""

    def __init__(self, more: Callable[[], str], start: int, at_array_start: bool, exact: bool = True) -> None:
        self.more, self.text, self.position, self.consumed = more, "", 0, start
        self.expect_value, self.values = True, 0 if at_array_start else 1
        self.scanner = json.JSONDecoder(parse_float=exact_float) if exact else json.JSONDecoder()

    def offset(self) -> int:
        """Stream offset (bytes) of the current position."""
        return self.consumed + len(self.text[:self.position].encode())

    def refill(self) -> bool:
        block = self.more()
        if not block:
            return False
        self.consumed += len(self.text[:self.position].encode())
        self.text, self.position = self.text[self.position:] + block, 0
        return True

    def events(self, fail: Callable[[str], Exception]) -> Iterator[Event]:
        while True:
            text, position = self.text, self.position
            while position < len(text) and text[position] in " \t\r\n":
                position += 1
            self.position = position
            if position >= len(text):
                if not self.refill():
                    raise fail("the events array does not end")
                continue
            char = text[position]
            if char == "]" and (not self.expect_value or self.values == 0):
                self.position += 1
                return
            if not self.expect_value:
                if char != ",":
                    raise fail(f"expected ',' or ']' after an event, found {char!r}")
                self.position, self.expect_value = position + 1, True
                continue
            try:
                value, end = self.scanner.raw_decode(text, position)
            except json.JSONDecodeError as exc:
                if len(text) - exc.pos < (1 << 20) and self.refill():
                    continue  # an object cut by the end of the text read so far
                self.position = exc.pos
                raise fail(exc.msg) from None
            except RecursionError:  # args nested thousands deep: Python's decoder recurses per level
                self.position = position
                raise fail(f"an event nested deeper than Python's JSON decoder follows "
                           f"(about {sys.getrecursionlimit()} levels)") from None
            self.position, self.expect_value = end, False
            self.values += 1
            if isinstance(value, dict):
                yield _event(value)

    def rest(self) -> str:
        parts = [self.text[self.position:]]
        while True:
            block = self.more()
            if not block:
                return "".join(parts)
            parts.append(block)
