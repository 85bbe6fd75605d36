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
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
import contextlib
import gc
import itertools
import json
import operator
import os
import re
import sys
from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Union

if TYPE_CHECKING:  # imported where used: `profilectl env-check` loads this module and needs none
    import mmap
    from concurrent.futures import Executor, Future

from profilectl.errors import FormatError, ProfilectlError
from profilectl.formats.torch_memory_events import MEMORY_TEXT, memory_events_of
from profilectl.formats.torch_shapes import SHAPE_ARGS, SHAPES_TEXT, add_calls, shaped_of

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_MIN, CHUNK_MAX = 4 << 20, 16 << 20
PARALLEL_MIN_BYTES = 48 << 20  # below this, worker start-up costs more than it saves
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


def _limit(name: str, default: int) -> int:
    from profilectl.files import env_limit
    return env_limit(name, default)

KERNEL = "kernel"
COPY_CATEGORIES = frozenset({"gpu_memcpy", "gpu_memset"})
API_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})  # HIP calls too: kineto files them so on ROCm
OPERATOR = "cpu_op"
# torch builds key_averages() from the profiler's FunctionEvents: every CPU-side kineto activity
# (torch's deviceTypeFromActivity), nested per thread. Python function events are not among them
# (torch 2.x drops them from the event list and exposes them as stacks), so they are no parent here.
TREE_CATEGORIES = frozenset({OPERATOR, "user_annotation", "cuda_runtime", "cuda_driver", "external_correlation",
                             "cpu_instant_event", "glow_runtime", "mtia_runtime", "xpu_runtime",
                             "privateuse1_runtime"})
# torch.autograd.profiler_util._filter_name: left out of the event list altogether.
UNLISTED_BY_TORCH = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                               "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                               "aten::is_leaf", "aten::output_nr", "aten::_version"})

Sums = list[int]  # [count, total, sum of squares, min, max] of integer nanoseconds
SumsByName = dict[str, Sums]


class Event(NamedTuple):
    """The fields read of one trace event (the stdlib path's form of the msgspec Struct)."""
    ph: Any
    cat: Any
    name: Any
    pid: Any
    tid: Any
    ts: Any
    dur: Any
    args: Any = None  # only its "correlation" is read (the link of a launch call to its kernel)


_MISSING: Any = object()  # an event without "dur" (the stdlib path's stand-in for msgspec.UNSET)
_UNSET: Any = _MISSING  # msgspec.UNSET once msgspec is loaded


@dataclass
class ThreadEvents:
    """The tree-building CPU events of one (pid, tid), in file order: integer ns, name index, and
    what the event is (`operator`: TREE_OPERATOR, TREE_ANNOTATION, or TREE_OTHER for the CPU events
    that are parents or children only)."""
    start: array = field(default_factory=lambda: array("q"))
    end: array = field(default_factory=lambda: array("q"))
    name: array = field(default_factory=lambda: array("l"))
    operator: bytearray = field(default_factory=bytearray)


@dataclass
class Partial:
    """What one chunk yields: sums per name, the CPU events for the operator tree (names as indices
    into `names`), and, for the chunk that holds the end of the events array, the text after it."""
    kernels: SumsByName = field(default_factory=dict)
    copies: SumsByName = field(default_factory=dict)
    api: SumsByName = field(default_factory=dict)
    threads: dict[tuple[Any, Any], ThreadEvents] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    tail: str | None = None
    events: int = 0
    timeline: TimelineEvents = field(default_factory=lambda: TimelineEvents())
    untimed: int = 0  # events with a duration but no "ts": in the tables, not on the timeline
    # Events carrying a collective's args (COLLECTIVE_ARGS): (on the GPU, event name, start ns, end ns,
    # the args' values in COLLECTIVE_ARGS order), in file order
    collectives: list[tuple[bool, str, int, int, tuple[Any, ...]]] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)  # the document's keys beside traceEvents
    # Operators recorded with shapes (formats/torch_shapes.py): distinct signatures, and per call
    # (pid, tid, start ns, end ns, signature index), in file order
    shaped_signatures: list[tuple[Any, ...]] = field(default_factory=list)
    shaped: list[tuple[Any, Any, int, int, int]] = field(default_factory=list)
    # profile_memory's [memory]/[OutOfMemory] events of the GPU (formats/torch_memory.py), in file order
    memory_events: list[tuple[int, int, int, int, int, bool]] = field(default_factory=list)


@dataclass
class TimelineEvents:
    """What the timeline analysis needs (analysis/timeline.py), in integer ns: every GPU activity
    (kernel 0, copy or memset 1) with its stream and launch correlation, every runtime/driver call
    with its correlation, and the ProfilerStep#N ranges (CPU side and, in torch 2.x, GPU side).
    ~33 bytes per GPU event: flat arrays, not objects."""
    start: array = field(default_factory=lambda: array("q"))
    end: array = field(default_factory=lambda: array("q"))
    stream: array = field(default_factory=lambda: array("l"))  # index into `streams`
    kind: bytearray = field(default_factory=bytearray)
    name: array = field(default_factory=lambda: array("l"))  # index into `names`
    correlation: array = field(default_factory=lambda: array("q"))  # -1: none
    streams: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    api_start: array = field(default_factory=lambda: array("q"))
    api_end: array = field(default_factory=lambda: array("q"))
    api_correlation: array = field(default_factory=lambda: array("q"))
    api_thread: array = field(default_factory=lambda: array("l"))  # index into `threads`: who launched it
    threads: list[tuple[Any, Any]] = field(default_factory=list)  # (pid, tid)
    markers: list[tuple[str, int, int, bool]] = field(default_factory=list)  # name, start, end, on the GPU

    def extend(self, other: "TimelineEvents") -> None:
        """Append another chunk's events (its streams and names re-indexed into ours)."""
        pairs: tuple[tuple[list[Any], list[Any], array, array], ...] = (
            (self.streams, other.streams, other.stream, self.stream), (self.names, other.names, other.name, self.name),
            (self.threads, other.threads, other.api_thread, self.api_thread))
        for mine, theirs, index, target in pairs:
            known = {value: i for i, value in enumerate(mine)}
            remap = []
            for value in theirs:
                if value not in known:
                    known[value] = len(mine)
                    mine.append(value)
                remap.append(known[value])
            target.extend(index if remap == list(range(len(remap))) else _remapped(index, remap))
        self.start.extend(other.start)
        self.end.extend(other.end)
        self.kind.extend(other.kind)
        self.correlation.extend(other.correlation)
        self.api_start.extend(other.api_start)
        self.api_end.extend(other.api_end)
        self.api_correlation.extend(other.api_correlation)
        self.markers.extend(other.markers)


def _remapped(index: array, remap: list[int]) -> array:
    """Indices re-numbered through `remap` (a chunk's names into the merged list), by numpy."""
    import numpy as np
    out = array(index.typecode)
    if len(index):
        width = np.dtype(index.typecode)
        out.frombytes(np.asarray(remap, dtype=width)[np.frombuffer(index, dtype=width)].tobytes())
    return out


STEP_MARKER = "ProfilerStep#"
GPU_MARKER = "gpu_user_annotation"  # torch's GPU-side copy of a range (CPU-side ones are user_annotation)
GPU_MARKERS = frozenset({GPU_MARKER, "gpu_user_Annotation"})  # the second: kineto 2021-06 to 2022-05
# torch 1.8/1.9 wrote record_function ranges with the operators (category "Operator"); the ranges
# torch itself opens are told apart by their names: profiler.step()'s ProfilerStep#N, the DataLoader
# iterator's and the optimizer's (torch/utils/data/dataloader.py `enumerate(DataLoader)#...__next__`,
# torch/optim/optimizer.py `Optimizer.step#...` and `Optimizer.zero_grad#...` of those releases). A
# user's own record_function name cannot be told from an operator's in those traces.
LEGACY_ANNOTATIONS = ("ProfilerStep#", "enumerate(DataLoader)#", "Optimizer.step#", "Optimizer.zero_grad#")
# The args torch's record_param_comms range carries and Kineto copies onto the collective's kernel
# (torch/csrc/profiler/util.h and libkineto/src/output_json.cpp: kCommsName ... kSeqNum): field name
# here, key in the trace. "Process Group ID" before torch 2.2 (HTA's ns_resolution trace), "Process
# Group Name" after; "Seq" from March 2026 (pytorch/pytorch#177148; "seq" is read too).
COLLECTIVE_ARGS = (("collective", "Collective name"), ("pg_name", "Process Group Name"),
                   ("pg_id", "Process Group ID"), ("pg_desc", "Process Group Description"), ("seq", "Seq"),
                   ("seq_lower", "seq"), ("in_nelems", "In msg nelems"), ("out_nelems", "Out msg nelems"),
                   ("group_size", "Group size"), ("dtype", "dtype"), ("group_ranks", "Process Group Ranks"))


class _Undecodable(Exception):
    """A chunk that the chunk decoder could not read: re-read it incrementally from its start."""


# --------------------------------------------------------------------------------------------
# Decoding


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
    global _UNSET
    _UNSET = msgspec.UNSET

    def decode(data: bytes | bytearray | memoryview) -> list[Any]:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            # an odd type somewhere (a string ts): the general path decides
            return _stdlib_decode_exact(data) if exact else _stdlib_decode(data)
        except msgspec.DecodeError:
            raise _Undecodable from None
    return decode


def _stdlib_decode(data: bytes | bytearray | memoryview, parse_float: Callable[[str], Any] = float) -> list[Any]:
    try:
        items = json.loads(bytes(data) if isinstance(data, memoryview) else data, parse_float=parse_float)
    except (ValueError, RecursionError):
        raise _Undecodable from None
    return [Event(e.get("ph"), e.get("cat"), e.get("name", "?"), e.get("pid", 0), e.get("tid", 0),
                  e.get("ts"), e.get("dur", _MISSING), _Args.of(e.get("args")))
            for e in items if isinstance(e, dict)]


def _stdlib_decode_exact(data: bytes | bytearray | memoryview) -> list[Any]:
    return _stdlib_decode(data, exact_float)


# Exact time. A double holds a µs timestamp to the ns only below 2**43 µs (its spacing there is
# ~1 ns): relative clocks (torch 2.x on CUDA, 4.4e12) are exact, epoch µs with ns fractions (HTA's
# ns_resolution_trace, 1.7e15, spacing 0.25 µs) are not. A chunk whose first timestamp is that
# large and that holds a fraction is decoded with such numbers kept as their text (exact_float),
# turned into integer ns by _nanoseconds: no float round trip. Other chunks take the fast path.
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


def fast_decoder_available() -> bool:
    return decoder(True) is not _stdlib_decode


# --------------------------------------------------------------------------------------------
# Aggregating decoded events


def _nanoseconds(path: str, event: Any, value: Any, what: str) -> int:
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


# What each category is for: a table of its own (kernels 1, copies 2, API calls 3), the operator
# tree (4: an operator; 8: another CPU event, parent or child only), or both; 16: a range on the
# GPU (gpu_user_annotation); 32: a user annotation (record_function, ProfilerStep#N); 64: a CPU
# event that may be a ProfilerStep#N range.
ANNOTATION = "user_annotation"
_ROLE = {KERNEL: 1, **{c: 2 for c in COPY_CATEGORIES}, **{c: 8 for c in TREE_CATEGORIES}}
_ROLE.update({c: 3 | 8 for c in API_CATEGORIES})
_ROLE[OPERATOR] = 4 | 8
_ROLE[ANNOTATION] = 8 | 32 | 64
# Categories as each Kineto release writes them (libkineto/src/output_json.cpp and ActivityType,
# pytorch/kineto history): torch 1.8/1.9 wrote "Operator", "Runtime", "Kernel", "Memcpy", "Memset"
# and "User" for annotations; kineto of mid-2021 to mid-2022 (torch 1.10/1.11) wrote GPU ranges as
# "gpu_user_Annotation"; later releases the lower-case names above. Matched by a dict lookup: free.
LEGACY_CATEGORIES = {"Kernel": KERNEL, "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
                     "Operator": OPERATOR, "User": "user_annotation"}
_ROLE.update({old: _ROLE[new] for old, new in LEGACY_CATEGORIES.items()})
_ROLE["Operator"] |= 64  # torch 1.8/1.9 wrote record_function ranges (ProfilerStep#N too) as operators
# What a tree event is (ThreadEvents.operator), by role: 1 an operator, 2 an annotation, 0 other.
TREE_OTHER, TREE_OPERATOR, TREE_ANNOTATION = 0, 1, 2
_TREE_KIND = [TREE_OPERATOR if role & 4 else TREE_ANNOTATION if role & 32 else TREE_OTHER for role in range(128)]
# The legacy autograd profiler's export (torch builds without Kineto, e.g. Debian's 1.13) has no
# "cat": CPU operators and CUDA kernels are told apart by their pid, and the ranges torch opens itself
# (ProfilerStep#N ...) by their names, as torch 1.8/1.9's "Operator" (role 64); a user's own
# record_function range cannot be told from an operator there (profilectl's start-up hook writes
# such a profile with categories: backends/rank_startup/sitecustomize.py).
_LEGACY_ROLE = {"CPU functions": 4 | 8 | 64, "CUDA functions": 1}


def _collective_values(args: Any) -> tuple[Any, ...]:
    """An event's COLLECTIVE_ARGS values (msgspec's struct or the stdlib path's _Args)."""
    return tuple(getattr(args, field) for field, _ in COLLECTIVE_ARGS)


_COLLECTIVE_DECODER: list[Any] = []


def _collectives_of(text: bytes | bytearray | memoryview) -> list[tuple[bool, str, int, int, tuple[Any, ...]]]:
    """Partial.collectives of a chunk that the columns read (their decoder keeps only args.correlation,
    so that the many chunks without a collective pay nothing for them): the chunk decoded once more,
    into the args of COLLECTIVE_ARGS only, times exact (numbers as their text, to ns by _nanoseconds).
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
    for event in decode(text):
        role = _ROLE_OF_CAT.get(event.cat, 0) if type(event.cat) is str else 0
        if event.ph != "X" or not (role & 3 == 1 or role & 8) or not isinstance(event.args, dict) \
                or "Collective name" not in event.args or event.ts is None or event.dur is None:
            continue
        start = _nanoseconds("", event, event.ts, "ts")
        found.append((role & 3 == 1, str(event.name), start, start + _nanoseconds("", event, event.dur, "dur"),
                      _collective_values(convert(event.args, args_type))))
    return found


def _shaped_names() -> frozenset[str]:
    from profilectl.formats.torch_shapes import names
    return names()


def aggregate(path: str, events: Iterable[Any], into: Partial | None = None) -> Partial:
    """Sums per name of kernels, copies and runtime/driver calls, and the CPU events of each
    thread. The hottest loop of a trace read: kept flat on purpose (no calls per event)."""
    out = into or Partial()
    tables: tuple[SumsByName, ...] = ({}, out.kernels, out.copies, out.api)
    names, threads = out.names, out.threads
    name_index: dict[str, int] = {n: i for i, n in enumerate(names)}
    role_of = _ROLE.get
    tree_kind = _TREE_KIND
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
    launcher: tuple[Any, Any] = (_MISSING, _MISSING)
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
                role = _LEGACY_ROLE.get(event.pid) if type(event.pid) is str else None
                if role is None:
                    continue
        dur = event.dur
        if type(dur) is float and dur - dur == 0.0:
            ns = round(dur * 1000)
        elif dur is _MISSING or dur is _UNSET:
            continue  # as before: an event without a duration is not a measurement
        else:
            ns = _nanoseconds(path, event, dur, "dur")
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
            exact_ns = _nanoseconds(path, event, ts, "ts")
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
                collectives.append((low == 1, name, start, start + ns, _collective_values(args)))
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


def merge_partials(parts: Iterable[Partial]) -> Partial:
    """Chunks in file order: sums added, thread events appended with names re-indexed."""
    out = Partial()
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
                thread.name.extend(_remapped(events.name, remap))
            thread.operator.extend(events.operator)
        out.timeline.extend(part.timeline)
        out.collectives.extend(part.collectives)
        out.memory_events.extend(part.memory_events)
        if part.shaped:
            known = {sig: i for i, sig in enumerate(out.shaped_signatures)}
            remap_sig = [known.setdefault(sig, len(known)) for sig in part.shaped_signatures]
            out.shaped_signatures[:] = list(known)
            out.shaped.extend((pid, tid, a, b, remap_sig[k]) for pid, tid, a, b, k in part.shaped)
        out.events += part.events
        out.untimed += part.untimed
        if part.tail is not None:
            out.tail = part.tail
    return out


# --------------------------------------------------------------------------------------------
# Aggregating a chunk by columns: the same Partial as `aggregate`, without a Python loop per event
#
# The chunk is decoded into strictly typed Structs, tagged by "ph": complete events ("X") with
# strings, floats (NaN where a time is missing) and an integer correlation, every other phase (flows,
# metadata, instants, counters) with no field at all, its keys skipped. Each field comes out as a
# column through C-level map() calls and is grouped with numpy: no Python code runs per event
# (a 16 MB chunk of 30 k events: 18 ms of CPU against 25 ms for the loop, decoding ~10% faster). A chunk
# this decoder refuses (another type anywhere, an event without "ph", the legacy profiler's layout,
# a number past a double's exact integers) goes through `aggregate`: the same numbers (tested).

_NO_CORRELATION = -(1 << 63)  # an event without args.correlation (a chunk spelling it goes the general way)
NO_CORRELATION_TEXT = re.compile(re.escape(str(_NO_CORRELATION).encode()))  # `in` would not search a memoryview
_NOT_COMPLETE = "\0"  # the "cat" of every phase but "X": no role
_ROLE_OF_CAT = {**_ROLE, **{cat: 16 for cat in GPU_MARKERS}}
# Chrome's trace event format: every phase it defines (one Struct each: msgspec tags by value)
PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "O", "N", "D", "M", "R",
          "c", "(", ")", "V", "v")


def _columnar_decoder() -> Callable[[bytes | bytearray | memoryview], list[Any] | None] | None:
    """list of strictly typed events, or None where the chunk needs the general path."""
    try:
        import msgspec
    except ImportError:
        return None
    nan = float("nan")
    # "Collective name" only says whether the event carries a collective's args (_collectives_of reads them)
    column_args = msgspec.defstruct("ColumnArgs", [("correlation", int, _NO_CORRELATION), ("collective", Any, None)],
                                    gc=False, frozen=True, rename={"collective": "Collective name"})
    complete = msgspec.defstruct("CompleteEvent", [
        ("cat", str, ""), ("name", str, "?"), ("pid", int | str, 0), ("tid", int | str, 0),
        ("ts", float, nan), ("dur", float, nan), ("args", column_args, column_args())],
        gc=False, tag_field="ph", tag="X")
    others = [msgspec.defstruct(f"Phase{i}", [], gc=False, tag_field="ph", tag=phase,
                                namespace={"cat": _NOT_COMPLETE, "pid": None}) for i, phase in enumerate(PHASES)]
    event: Any = Union.__getitem__((complete, *others))
    typed = msgspec.json.Decoder(list[event])

    def decode(data: bytes | bytearray | memoryview) -> list[Any] | None:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            return None  # an odd type somewhere: the general decoder and loop decide
        except msgspec.DecodeError:
            raise _Undecodable from None
    return decode


_COLUMNAR: list[Any] = []


def columnar_decoder() -> Callable[[bytes | bytearray | memoryview], list[Any] | None] | None:
    if not _COLUMNAR:
        _COLUMNAR.append(_columnar_decoder())
    return _COLUMNAR[0]


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


_CAT = operator.attrgetter("cat")
_NAME, _TS, _DUR = operator.attrgetter("name"), operator.attrgetter("ts"), operator.attrgetter("dur")
_PID, _PID_TID = operator.attrgetter("pid"), operator.attrgetter("pid", "tid")
_CORRELATION = operator.attrgetter("args.correlation")
_COLLECTIVE = operator.attrgetter("args.collective")
_TREE_KIND_BY_ROLE = bytes(_TREE_KIND)
_EXACT_DOUBLE = float(1 << 53)


def aggregate_columns(events: list[Any], into: Partial | None = None,
                      text: bytes | bytearray | memoryview | None = None) -> Partial | None:
    """`aggregate` of events from columnar_decoder's decoding (of `text`), by columns. None (nothing
    changed) where the chunk needs the general loop: a duration or time beyond a double's exact
    integers, the legacy profiler's layout, a correlation id spelt like the stand-in for none, a
    collective's args without the chunk's `text` to read them from."""
    import numpy as np
    count = len(events)
    if not _LEGACY_ROLE.keys().isdisjoint(set(map(_PID, events))):
        return None
    roles_of_all = list(map(_ROLE_OF_CAT.get, map(_CAT, events), itertools.repeat(0)))
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
        if (correlation[gpu] == _NO_CORRELATION).any() or (correlation[api] == _NO_CORRELATION).any():
            if text is None or NO_CORRELATION_TEXT.search(text):
                return None
        api = api[correlation[api] != _NO_CORRELATION]

    carrying = any(map(_COLLECTIVE, picked))  # events with a collective's args: the chunk is decoded again
    if carrying and text is None:
        return None

    out = into or Partial()
    out.events += count
    out.untimed += int(m - np.count_nonzero(timed))
    if carrying and text is not None:
        out.collectives.extend(_collectives_of(text))
    if text is not None and SHAPES_TEXT.search(text):  # recorded with shapes: those the data knows are kept
        add_calls(out, shaped_of(text, _ROLE, _nanoseconds))
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
        _extend(timeline.correlation, np.where(linked == _NO_CORRELATION, -1, linked))
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


# --------------------------------------------------------------------------------------------
# Operators: torch's key_averages() from the nesting of CPU events


def operator_sums(partial: Partial) -> dict[str, list[int]]:
    """tree_sums' operators."""
    return tree_sums(partial)[0]


def tree_sums(partial: Partial) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Per operator name, and per user annotation name (record_function, ProfilerStep#N, with a 7th
    value: GPU ns launched inside the range, see launched_gpu_time): [calls, total ns, self ns, sum of squares, min, max], as torch's
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


def launched_gpu_time(timeline: TimelineEvents) -> dict[tuple[Any, Any], Callable[[int, int], int]]:
    """Per launching thread: a function (start, end) -> the GPU ns (kernels, copies, memsets) of the
    activities whose runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) starts in [start, end) on
    that thread, linked by correlation id. torch counts a range's CUDA time the same way: the
    device time of what its CPU-side children launched."""
    return {key: _between(starts, prefix) for key, (starts, prefix) in _launched_columns(timeline).items()}


def _between(starts: Any, prefix: Any) -> Callable[[int, int], int]:
    """launched_gpu_time's function for one thread, on Python lists (the walk calls it per node)."""
    import bisect
    if starts is None:
        return _no_gpu
    begins, sums = starts.tolist(), prefix.tolist()

    def between(start: int, end: int) -> int:
        return sums[bisect.bisect_left(begins, end)] - sums[bisect.bisect_left(begins, start)]
    return between


def _launched_columns(timeline: TimelineEvents) -> dict[tuple[Any, Any], tuple[Any, Any]]:
    """Per launching thread: its runtime calls' starts, sorted, and the running sum (from 0) of the
    GPU ns each launched: the GPU time of calls starting in [a, b) is prefix[bisect(b)] - prefix[bisect(a)]."""
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


# --------------------------------------------------------------------------------------------
# Reading a file: the stream, the chunks, the workers


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
    if not os.environ.get("PROFILECTL_NO_ISAL"):
        try:
            from isal import igzip, isal_zlib
        except ImportError:
            pass
        else:
            return igzip.IGzipFile, (*errors, getattr(isal_zlib, "error"))  # its stub types it as an instance
    return gzip.GzipFile, errors


def _bounded_gzip(path: Path) -> IO[bytes]:
    reader, _ = gzip_reader()
    ratio, most = _limit("MAX_INFLATE_RATIO", MAX_INFLATE_RATIO), _limit("MAX_INFLATED_BYTES", MAX_INFLATED_BYTES)
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


def _read(fh: IO[bytes], size: int, path: Path | str) -> bytes:
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


def _last_cut(data: bytes | bytearray, before: int) -> tuple[int, int] | None:
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
    head, data = json_head.scan(lambda size: _read(fh, size, path), limit=HEAD_LIMIT)
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


def _check_document(path: Path, layout: Layout, tail: str) -> Any:
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


def _line_at(path: Path, offset: int) -> int:
    """1-based line number of a byte offset of the (decompressed) stream: for error messages only."""
    line, done = 1, 0
    with open_stream(path) as fh:
        while done < offset:
            block = _read(fh, min(1 << 24, offset - done), path)
            if not block:
                break
            line += block.count(b"\n")
            done += len(block)
    return line


def _event(value: dict[str, Any]) -> Event:
    return Event(value.get("ph"), value.get("cat"), value.get("name", "?"), value.get("pid", 0),
                 value.get("tid", 0), value.get("ts"), value.get("dur", _MISSING), _Args.of(value.get("args")))


class _Values:
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


def incremental(path: Path, start: int, at_array_start: bool, into: Partial) -> Partial:
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
                return utf8.decode(_read(fh, 8 << 20, path))
            except UnicodeDecodeError:
                raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None

        values = _Values(more, start, at_array_start)

        def fail(message: str) -> FormatError:
            return FormatError(f"{path}:{_line_at(path, values.offset())}: not valid JSON (truncated?): {message}")

        batch: list[Any] = []
        for event in values.events(fail):
            batch.append(event)
            if len(batch) >= 50_000:
                aggregate(str(path), batch, into)
                batch = []
        aggregate(str(path), batch, into)
        into.tail = values.rest()
    return into


@dataclass(frozen=True)
class Task:
    """One chunk: `[start, end)` of the stream, or its bytes (gzip: workers cannot seek in it) as
    `[` + the chunk + `]`, ready to decode: in `data`, or at offset `slot` of the shared ring (_Ring)."""
    path: str
    start: int
    end: int
    data: bytearray | None
    last: bool
    fast: bool
    window: int = 1 << 20  # the last chunk's final part read incrementally
    slot: int = -1  # where `[` + the chunk + `]` is in the ring, or -1


class _Ring:
    """The slots of a gzip trace's inflated chunks, shared with the worker processes: one anonymous
    shared mapping made before the pool forks (the workers inherit it: pool(); no name, nothing left
    behind if a process is killed). The parent writes `[` + chunk + `]` into the next slot and the worker
    decodes it in place: no pickling through the pool's pipe, no fresh pages per chunk (sending 4 MB
    chunks as bytes cost the parent 0.6 s and the workers 3-5 s of CPU in page faults and copies for
    805 MB of JSON). A slot is written again only once the chunk before in it was decoded: `slots`
    must exceed the chunks in flight (read_trace's in_workers waits for the oldest beyond `ahead`)."""

    def __init__(self, slots: int, slot_size: int) -> None:
        import mmap
        self.slots, self.slot_size, self.turn = slots, slot_size, 0
        self.memory = mmap.mmap(-1, slots * slot_size)

    def next_slot(self) -> int:
        """The offset of the slot of the next task (every task takes its turn, in a slot or not)."""
        offset = self.turn * self.slot_size
        self.turn = (self.turn + 1) % self.slots
        return offset


_RING: list[Any] = []  # in a worker: the ring of the pool it belongs to (pool's initializer)


def _slot_bytes(task: Task) -> memoryview:
    """`[` + the chunk + `]` where the parent wrote it, in place."""
    if not _RING:
        raise RuntimeError("a chunk in a shared ring, read by a process that has none")
    return memoryview(_RING[0])[task.slot:task.slot + task.end - task.start + 2]


def _chunk_bytes(task: Task) -> bytearray:
    """`[` + the chunk + `]` in one buffer."""
    if task.slot >= 0:
        return bytearray(_slot_bytes(task))
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
                    raise _Undecodable  # the file shrank while it was read
                got += n
    buffer[0], buffer[-1] = 0x5B, 0x5D
    return buffer


def read_chunk(task: Task) -> Partial:
    """A worker's job: decode one chunk and aggregate it. _Undecodable if it does not decode."""
    with gc_paused():
        if task.slot >= 0 and not task.last:
            view = _slot_bytes(task)
            return _aggregate_chunk(task.path, view, task.fast, needs_exact(view))
        buffer = _chunk_bytes(task)
        exact = needs_exact(buffer)
        if not task.last:
            return _aggregate_chunk(task.path, buffer, task.fast, exact)
        # The last chunk holds the array's end and the document's tail: most of it through the
        # chunk decoder, its last events and the `]` through the incremental reader.
        partial = Partial()
        body_end = len(buffer) - 1
        cut = _last_cut(buffer, body_end - task.window) if body_end > 2 * task.window else None
        tail_from = 1
        if cut is not None:
            end, tail_from = cut
            head = buffer[:end + 1]
            head[-1] = 0x5D
            _aggregate_chunk(task.path, head, task.fast, exact, partial)
        try:
            text = bytes(buffer[tail_from:body_end]).decode()
        except UnicodeDecodeError:
            raise _Undecodable from None
        values = _Values(lambda: "", 0, tail_from == 1, exact)
        values.text = text
        aggregate(task.path, values.events(lambda message: _Undecodable()), partial)
        if MEMORY_TEXT.search(text.encode()):
            partial.memory_events.extend(memory_events_of(text.encode()))
        partial.tail = values.rest()
        return partial


def _aggregate_chunk(path: str, data: bytearray | memoryview, fast: bool, exact: bool, into: Partial | None = None) -> Partial:
    """By columns where the chunk's types allow it, else the general decoder and loop; the
    profile_memory events of its text either way."""
    columnar = columnar_decoder() if fast and not exact else None
    done = None
    if columnar is not None:
        events = columnar(data)
        if events is not None:
            done = aggregate_columns(events, into, data)
    if done is None:
        done = aggregate(path, decoder(fast, exact)(data), into)
    if MEMORY_TEXT.search(data):
        done.memory_events.extend(memory_events_of(data))
    return done


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Decoding builds millions of short-lived objects: the cyclic collector would rescan them over
    and over (the stdlib decoder runs 2.4x slower with it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _tasks(path: Path, fh: IO[bytes], layout: Layout, first: bytes, size: int, chunk: int,
           fast: bool, seekable: bool, ring: _Ring | None = None) -> Iterator[Task]:
    """Chunks of about `chunk` bytes, cut at guessed event boundaries, in file order. A plain file
    is only sampled here (a window at each cut); the workers read the chunks themselves. A stream
    (gzip) is read here, its chunks copied into `ring` where given, else into their own buffers."""
    name = str(path)
    start = layout.events_start
    probe = min(1 << 20, chunk)  # how much is read around each cut
    longest = _limit("MAX_EVENT_BYTES", MAX_EVENT_BYTES)
    if seekable:
        while True:
            target = start + chunk
            if target + probe >= size:
                yield Task(name, start, size, None, True, fast, probe)
                return
            fh.seek(target)
            window = _read(fh, probe, path)
            cut = _next_cut(window, 0)
            while cut is None and target + len(window) < size:  # one event longer than the window
                window += _read(fh, probe, path)
                cut = _next_cut(window, 0)
                _bound_event(path, len(window), longest)
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
            more = _read(fh, 4 << 20, path)
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
                longest: int, ring: _Ring) -> Iterator[Task]:
    """_tasks of a stream, inflated straight into the ring's slots: `[`, the bytes left after the
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
                more = _read(fh, room - filled, path)  # one read: smaller ones cost more (1 MB: 1.5x)
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
        more = _read(fh, probe, path)
        eof = not more
        buffer += more
        cut = _next_cut(buffer, chunk)
        _bound_event(path, len(buffer) - chunk, longest)
    return cut, eof


def _bracketed(buffer: bytearray, end: int) -> bytearray:
    """`[` + buffer[:end] + `]`, copied once."""
    out = bytearray(end + 2)
    out[0], out[-1] = 0x5B, 0x5D
    with memoryview(buffer) as view:
        out[1:-1] = view[:end]
    return out


def _bound_event(path: Path, searched: int, longest: int) -> None:
    if searched > longest:
        raise FormatError(f"{path}: refused: no boundary between events within {longest} bytes (an event that "
                          "large, or not a trace); raise PROFILECTL_MAX_EVENT_BYTES to read it")


def workers_for(size: int) -> int:
    if size < PARALLEL_MIN_BYTES or os.environ.get("PROFILECTL_NO_PARALLEL"):
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _forks() -> bool:
    """Whether pool() forks its workers (they inherit what the parent mapped before)."""
    import multiprocessing
    return "fork" in multiprocessing.get_all_start_methods()


def pool(workers: int, ring: mmap.mmap | None = None) -> Executor:
    """Worker processes, forked where the system can; with `ring`, a shared mapping they inherit
    (the initializer's arguments are not pickled under fork) and read chunks from (_slot_bytes)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    context = multiprocessing.get_context("fork" if _forks() else None)
    if ring is None:
        return ProcessPoolExecutor(max_workers=workers, mp_context=context)
    if context.get_start_method() != "fork":
        raise ValueError("a shared ring needs forked workers")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_attach_ring, initargs=(ring,))


def _attach_ring(memory: mmap.mmap) -> None:
    _RING[:] = [memory]


def read_trace(path: Path, fast: bool = True, workers: int | None = None, chunk: int | None = None) -> Partial:
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
        ring = _Ring(ahead + 1, chunk + min(1 << 20, chunk) + 2) if gz and count > 1 and _forks() else None
        tasks = _tasks(path, fh, layout, first, size, chunk, fast, seekable=not gz, ring=ring)
        failed_at: list[int] = []  # where a chunk did not decode: read on incrementally from there

        def in_process() -> Iterator[Partial]:
            for task in tasks:
                try:
                    yield read_chunk(task)
                except _Undecodable:
                    failed_at.append(task.start)
                    return

        def in_workers(executor: Executor) -> Iterator[Partial]:
            in_flight: deque[tuple[Task, Future[Partial]]] = deque()
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
    doc = _check_document(path, layout, merged.tail or "")
    if isinstance(doc, dict):
        merged.top_level = {key: value for key, value in doc.items() if key != "traceEvents"}
    return merged


def _done(item: tuple[Task, "Future[Partial]"], failed_at: list[int]) -> Iterator[Partial]:
    task, future = item
    try:
        yield future.result()
    except _Undecodable:
        failed_at.append(task.start)
