"""The operators of a torch trace recorded with shapes (record_shapes=True): their input shapes,
dtypes and scalar arguments as Kineto writes them on each `cpu_op` event ("Input Dims", "Input
type", "Concrete Inputs"), linked to the kernels each call launched.

Only the operators profiling/operator_flops.yaml has a formula for are kept (the roofline needs
nothing else), as distinct signatures plus one small tuple per call, while the trace is streamed
(formats/chrome_columns.py calls `shaped_of` on a chunk whose text holds "Input Dims", and its
per-event loop keeps the same fields): a trace without shapes pays one substring search per chunk.

A call's GPU time: the kernels (not copies or memsets) whose launch call (cudaLaunchKernel,
hipLaunchKernel, cudaGraphLaunch, ...) starts inside the operator's range on its thread, linked by
correlation id, as torch counts an operator's CUDA time. Where operators of the data nest on a
thread (aten::addmm inside aten::linear), the outermost one is the call (profiling/operator_flops.yaml).
"""

from __future__ import annotations

import bisect
import functools
import re
from typing import TYPE_CHECKING, Any, Callable

from profilectl.model.operators import KERNELS_KEPT, OperatorShape

if TYPE_CHECKING:
    from profilectl.formats.chrome_events import ChunkSums

# The args read, in the order of chrome_decode's EventArgs fields (name there, key in the trace)
SHAPE_ARGS = (("dims", "Input Dims"), ("types", "Input type"), ("concrete", "Concrete Inputs"))
OPERATOR_FLOPS = "operator_flops.yaml"  # the formulas (analysis/operator_roofline.py evaluates them)
SHAPES_TEXT = re.compile(rb'"Input Dims"')  # a chunk without it has no shapes (`in` would not search a memoryview)
MAX_DEPTH = 4  # "Input Dims" nests a TensorList's shapes one level deeper; nothing deeper is a shape

# One call: (pid, tid, start ns, end ns, signature index into ChunkSums.shaped_signatures)
Call = tuple[Any, Any, int, int, int]
# A signature: (operator name, dims, types, concrete), hashable
Signature = tuple[str, tuple[Any, ...], tuple[str, ...], tuple[str, ...]]


@functools.lru_cache(maxsize=1)
def names() -> frozenset[str]:
    """The operators profiling/operator_flops.yaml has a formula for: the reader keeps only these."""
    from profilectl import data
    return frozenset(data.load_mapping(OPERATOR_FLOPS).get("operators") or {})


def frozen(value: Any, depth: int = 0) -> Any:
    """A JSON value as hashable tuples (lists to tuples); anything nested past MAX_DEPTH dropped."""
    if isinstance(value, list):
        return tuple(frozen(v, depth + 1) for v in value) if depth < MAX_DEPTH else ()
    return value if isinstance(value, (int, float, str)) or value is None else str(value)


def signature_of(name: str, dims: Any, types: Any, concrete: Any) -> Signature | None:
    """None where the args are not what Kineto writes (lists of one entry per argument)."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    return (name, frozen(dims), tuple(str(t) for t in types),
            tuple(str(c) for c in concrete) if isinstance(concrete, list) else ())


def add_calls(into: "ChunkSums", found: list[tuple[Any, Any, int, int, str, Any, Any, Any]]) -> None:
    """Calls (pid, tid, start, end, name, dims, types, concrete) into the partial, signatures interned.
    dims, types and concrete are decoded values (the per-event loop) or their JSON text as bytes
    (`shaped_of`): a chunk's calls share a few signatures, so each distinct text is decoded and made
    hashable once (per call that cost more than the rest of the chunk's reading)."""
    if not found:
        return
    known = {s: i for i, s in enumerate(into.shaped_signatures)}
    by_text: dict[tuple[str, bytes, bytes, bytes], int | None] = {}
    for pid, tid, start, end, name, dims, types, concrete in found:
        if isinstance(dims, bytes):
            text_key = (name, dims, types, concrete)
            index = by_text.get(text_key, -1)
            if index == -1:
                index = by_text[text_key] = _intern(into, known, signature_of(
                    name, _json(dims), _json(types), _json(concrete) if concrete else None))
        else:
            index = _intern(into, known, signature_of(name, dims, types, concrete))
        if index is not None:
            into.shaped.append((pid, tid, start, end, index))


def _intern(into: "ChunkSums", known: dict[Signature, int], sig: Signature | None) -> int | None:
    if sig is None:
        return None
    index = known.get(sig)
    if index is None:
        index = known[sig] = len(into.shaped_signatures)
        into.shaped_signatures.append(sig)
    return index


def _json(text: bytes) -> Any:
    import msgspec
    return msgspec.json.decode(text)


_DECODER: list[Any] = []


def shaped_of(text: bytes | bytearray | memoryview, roles: dict[str, int],
              nanoseconds: Callable[[str, Any, Any, str], int]) -> list[tuple[Any, Any, int, int, str, Any, Any, Any]]:
    """The calls of a chunk (`[` + events + `]`) that the columns read: decoded once more with the
    args left raw, and only the operators of the data's args decoded; times exact (numbers as their
    text, to ns as the reader's other paths make them). `roles` and `nanoseconds` are the stream
    reader's (formats/chrome_events.py, chrome_decode.py), passed in: that module imports this one."""
    import msgspec

    if not _DECODER:
        event = msgspec.defstruct("ShapedEvent", [("ph", Any, None), ("cat", Any, None), ("name", Any, "?"),
                                                  ("pid", Any, 0), ("tid", Any, 0), ("ts", Any, None),
                                                  ("dur", Any, None), ("args", msgspec.Raw, msgspec.Raw())], gc=False)
        # the shape args as their JSON text (add_calls decodes each distinct one once)
        args = msgspec.defstruct("ShapeArgs", [(field, msgspec.Raw, msgspec.Raw()) for field, _ in SHAPE_ARGS],
                                 gc=False, rename=dict(SHAPE_ARGS))
        # the args typed in the same pass (one decode per chunk, not one per event); a chunk where an
        # event's args are not an object or null fails that as a whole and takes the per-event path
        typed = msgspec.defstruct("ShapedEventArgs", [("ph", Any, None), ("cat", Any, None), ("name", Any, "?"),
                                                      ("pid", Any, 0), ("tid", Any, 0), ("ts", Any, None),
                                                      ("dur", Any, None), ("args", args | None, None)], gc=False)
        _DECODER.extend((msgspec.json.Decoder(list[event], float_hook=str).decode,  # type: ignore[valid-type]
                         msgspec.json.Decoder(args).decode,
                         msgspec.json.Decoder(list[typed], float_hook=str).decode))  # type: ignore[valid-type]
    decode, decode_args, decode_typed = _DECODER
    wanted = names()
    found = []
    try:
        events, typed_args = decode_typed(text), True
    except msgspec.ValidationError:
        events, typed_args = decode(text), False
    for event in events:
        if event.ph != "X" or not event.args or event.ts is None or event.dur is None \
                or not isinstance(event.name, str) or event.name not in wanted \
                or not (roles.get(event.cat, 0) if isinstance(event.cat, str) else 0) & 4:
            continue
        if typed_args:
            values = event.args
        else:
            try:
                values = decode_args(event.args)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # args null, or not an object
        dims = bytes(values.dims)
        if not dims or dims == b"null":
            continue
        start = nanoseconds("", event, event.ts, "ts")
        concrete = bytes(values.concrete)
        found.append((event.pid, event.tid, start, start + nanoseconds("", event, event.dur, "dur"), event.name,
                      dims, bytes(values.types) or b"null", b"" if concrete == b"null" else concrete))
    return found


# ------------------------------------------------------------------ calls -> rows
def _outermost(calls: list[Call]) -> list[Call]:
    """Per thread, the calls not inside another call of the data (torch's nesting by time)."""
    by_thread: dict[tuple[Any, Any], list[Call]] = {}
    for call in calls:
        by_thread.setdefault((call[0], call[1]), []).append(call)
    kept = []
    for mine in by_thread.values():
        mine.sort(key=lambda c: (c[2], -c[3]))
        reach = None
        for call in mine:
            if reach is not None and call[2] < reach and call[3] <= reach:
                continue  # inside the last outermost call
            kept.append(call)
            reach = call[3]
    return kept


def _launches(partial: "ChunkSums") -> tuple[dict[tuple[Any, Any], tuple[list[int], list[int]]],
                                           dict[int, list[tuple[int, int]]]]:
    """Per launching thread: its runtime calls' starts (sorted) and correlation ids; per correlation
    id: the kernels it launched as (name index, ns)."""
    import numpy as np
    timeline = partial.timeline
    kernels: dict[int, list[tuple[int, int]]] = {}
    if len(timeline.correlation):
        corr = np.frombuffer(timeline.correlation, dtype=np.int64)
        kind = np.frombuffer(bytes(timeline.kind), dtype=np.uint8)
        mine = (kind == 0) & (corr >= 0)
        duration = (np.frombuffer(timeline.end, dtype=np.int64) - np.frombuffer(timeline.start, dtype=np.int64))[mine]
        width = np.int64 if timeline.name.itemsize == 8 else np.int32
        for c, n, d in zip(corr[mine].tolist(), np.frombuffer(timeline.name, dtype=width)[mine].tolist(),
                           duration.tolist()):
            kernels.setdefault(c, []).append((n, d))
    threads: dict[tuple[Any, Any], tuple[list[int], list[int]]] = {}
    if len(timeline.api_correlation):
        starts = np.frombuffer(timeline.api_start, dtype=np.int64)
        corr = np.frombuffer(timeline.api_correlation, dtype=np.int64)
        who = np.frombuffer(timeline.api_thread, dtype=np.int64 if timeline.api_thread.itemsize == 8 else np.int32)
        for index, key in enumerate(timeline.threads):
            chosen = np.flatnonzero(who == index)
            order = chosen[np.argsort(starts[chosen], kind="stable")]
            threads[key] = (starts[order].tolist(), corr[order].tolist())
    return threads, kernels


def operator_shapes(rank: str, partial: "ChunkSums") -> tuple[OperatorShape, ...]:
    """One row per signature: its outermost calls, their CPU time and the kernels they launched."""
    if not partial.shaped:
        return ()
    threads, kernels = _launches(partial)
    names_ = partial.timeline.names
    sums: dict[int, list[Any]] = {}  # signature -> [calls, cpu ns, gpu ns, launches, {kernel name index: ns}]
    for pid, tid, start, end, sig in _outermost(list(partial.shaped)):
        row = sums.setdefault(sig, [0, 0, 0, 0, {}])
        row[0] += 1
        row[1] += end - start
        launched = threads.get((pid, tid))
        if launched is None:
            continue
        begins, correlations = launched
        for k in range(bisect.bisect_left(begins, start), bisect.bisect_left(begins, end)):
            for name, ns in kernels.get(correlations[k], ()):
                row[2] += ns
                row[3] += 1
                row[4][name] = row[4].get(name, 0) + ns
    out = []
    for sig, (calls, cpu, gpu, launches, by_kernel) in sums.items():
        name, dims, types, concrete = partial.shaped_signatures[sig]
        heaviest = sorted(by_kernel.items(), key=lambda item: -item[1])[:KERNELS_KEPT]
        out.append(OperatorShape(rank=rank, name=name, input_dims=dims, input_types=types, concrete=concrete,
                                 calls=calls, cpu_ns=cpu, gpu_ns=gpu, launches=launches,
                                 kernels=tuple((names_[k], ns) for k, ns in heaviest)))
    out.sort(key=lambda r: (-r.gpu_ns, r.name))
    return tuple(out)
