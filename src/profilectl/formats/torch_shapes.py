"""The operators of a torch trace recorded with shapes (record_shapes=True): their input shapes,
dtypes and scalar arguments as Kineto writes them on each `cpu_op` event ("Input Dims", "Input
type", "Concrete Inputs"), linked to the kernels each call launched.

Only the operators profiling/operator_flops.yaml has a formula for are kept (the roofline needs
nothing else), as distinct signatures plus one small tuple per call, while the trace is streamed:
chrome_decode's columnar decoder keeps the shape args as their JSON text (chrome_columns picks the
calls), the per-event loop (chrome_aggregate) as decoded values; add_calls takes either.

A call's GPU time: the kernels (not copies or memsets) whose launch call (cudaLaunchKernel,
hipLaunchKernel, cudaGraphLaunch, ...) starts inside the operator's range on its thread, linked by
correlation id, as torch counts an operator's CUDA time. Where operators of the data nest on a
thread (aten::addmm inside aten::linear), the outermost one is the call (profiling/operator_flops.yaml).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from profilectl.model.operators import KERNELS_KEPT, OperatorShape

if TYPE_CHECKING:
    from profilectl.formats.chrome_events import ChunkSums

# The args read, in the order of chrome_decode's EventArgs fields (name there, key in the trace)
SHAPE_ARGS = (("dims", "Input Dims"), ("types", "Input type"), ("concrete", "Concrete Inputs"))
OPERATOR_FLOPS = "operator_flops.yaml"  # the formulas (analysis/operator_roofline.py evaluates them)
MAX_DEPTH = 4  # "Input Dims" nests a TensorList's shapes one level deeper; nothing deeper is a shape

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
    """Calls (pid, tid, start, end, name, dims, types, concrete) into the partial, signatures and
    threads interned. dims, types and concrete are decoded values (the per-event loop) or their JSON
    text as bytes (the columnar path): a chunk's calls share a few signatures, so each distinct text
    is decoded and made hashable once (per call that cost more than the rest of the chunk's reading)."""
    if not found:
        return
    shaped = into.shaped
    known = {s: i for i, s in enumerate(shaped.signatures)}
    thread_index = {t: i for i, t in enumerate(shaped.threads)}
    by_text: dict[tuple[str, bytes, bytes, bytes], int | None] = {}
    calls: list[int] = []
    for pid, tid, start, end, name, dims, types, concrete in found:
        if isinstance(dims, bytes):
            text_key = (name, dims, types, concrete)
            index = by_text.get(text_key, -1)
            if index == -1:
                index = by_text[text_key] = _intern(shaped.signatures, known, signature_of(
                    name, _json(dims), _json(types), _json(concrete) if concrete else None))
        else:
            index = _intern(shaped.signatures, known, signature_of(name, dims, types, concrete))
        if index is not None:
            thread = thread_index.get((pid, tid))
            if thread is None:
                thread = thread_index[pid, tid] = len(shaped.threads)
                shaped.threads.append((pid, tid))
            calls += (thread, start, end, index)
    shaped.calls.extend(calls)


def _intern(signatures: list[Signature], known: dict[Signature, int], sig: Signature | None) -> int | None:
    if sig is None:
        return None
    index = known.get(sig)
    if index is None:
        index = known[sig] = len(signatures)
        signatures.append(sig)
    return index


def _json(text: bytes) -> Any:
    import msgspec
    return msgspec.json.decode(text)


# ------------------------------------------------------------------ calls -> rows
# By columns (numpy), not a loop per call: a trace recorded with shapes has one call per operator
# event, millions of them. tests/unit/test_operator_shapes_columns.py holds the rule as a loop and
# checks these give the same rows, in the same order, on real traces and random ones.

def _outermost(thread: Any, start: Any, end: Any) -> Any:
    """The calls not inside another call of the data on their thread (torch's nesting by time), in
    the order the rows are made: threads in order of first appearance, then by start, the longer
    first. A call is inside when it starts before and ends no later than the furthest end of the
    calls before it on its thread."""
    import numpy as np
    order = np.lexsort((-end, start, thread))
    t, s, e = thread[order], start[order], end[order]
    bounds = np.flatnonzero(np.r_[True, t[1:] != t[:-1], True])
    reach = np.empty_like(e)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        reach[a] = np.iinfo(np.int64).min  # the first call of a thread is outermost
        if b - a > 1:
            reach[a + 1:b] = np.maximum.accumulate(e[a:b - 1])
    inside = (s < reach) & (e <= reach)
    return order[~inside]


def _kernels_by_launch(timeline: Any) -> tuple[Any, Any, Any, Any]:
    """The kernels (not copies or memsets) that have a correlation id, sorted by it (file order
    within one id): (correlation, name index, ns, prefix sums of ns)."""
    import numpy as np
    if not len(timeline.correlation):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(1, dtype=np.int64)
    corr = np.frombuffer(timeline.correlation, dtype=np.int64)
    mine = (np.frombuffer(bytes(timeline.kind), dtype=np.uint8) == 0) & (corr >= 0)
    width = np.int64 if timeline.name.itemsize == 8 else np.int32
    ns = (np.frombuffer(timeline.end, dtype=np.int64) - np.frombuffer(timeline.start, dtype=np.int64))[mine]
    corr, name = corr[mine], np.frombuffer(timeline.name, dtype=width)[mine].astype(np.int64)
    order = np.argsort(corr, kind="stable")
    ns = ns[order]
    return corr[order], name[order], ns, np.r_[0, np.cumsum(ns)]


def _spans(lo: Any, hi: Any) -> tuple[Any, Any]:
    """For ranges [lo, hi): the index of the range each member belongs to, and the member."""
    import numpy as np
    counts = hi - lo
    owner = np.repeat(np.arange(len(lo)), counts)
    starts = np.r_[0, np.cumsum(counts)[:-1]] if len(counts) else counts
    return owner, lo[owner] + (np.arange(len(owner)) - np.repeat(starts, counts))


def operator_shapes(rank: str, partial: "ChunkSums") -> tuple[OperatorShape, ...]:
    """One row per signature: its outermost calls, their CPU time and the kernels their launch calls
    (on the call's thread, starting inside it) launched, linked by correlation id."""
    import numpy as np
    if not partial.shaped:
        return ()
    shaped = partial.shaped
    columns = shaped.columns()
    # threads coded in order of their first call (the order rows are made in)
    first_seen = np.unique(columns[:, 0], return_index=True)[1]
    order = columns[np.sort(first_seen), 0]
    recode = np.zeros(len(shaped.threads), dtype=np.int64)
    recode[order] = np.arange(len(order))
    thread, start, end, sig = recode[columns[:, 0]], columns[:, 1], columns[:, 2], columns[:, 3]
    code = {shaped.threads[t]: i for i, t in enumerate(order.tolist())}
    kept = _outermost(thread, start, end)
    thread, start, end, sig = thread[kept], start[kept], end[kept], sig[kept]

    # the launch calls of each call's thread that start inside it: [lo, hi) into `launch_corr`
    timeline = partial.timeline
    lo, hi = np.zeros(len(kept), dtype=np.int64), np.zeros(len(kept), dtype=np.int64)
    launch_corr = np.zeros(0, dtype=np.int64)
    if len(timeline.api_correlation):
        api_start = np.frombuffer(timeline.api_start, dtype=np.int64)
        api_corr = np.frombuffer(timeline.api_correlation, dtype=np.int64)
        who = np.frombuffer(timeline.api_thread, dtype=np.int64 if timeline.api_thread.itemsize == 8 else np.int32)
        by_thread = np.lexsort((api_start, who))  # by thread, then start (file order among equal starts)
        launch_corr, launch_start, launch_thread = api_corr[by_thread], api_start[by_thread], who[by_thread]
        call_code = np.array([code.get(key, -1) for key in timeline.threads] or [-1], dtype=np.int64)
        for index in range(len(timeline.threads)):
            mine = call_code[index]
            if mine < 0:
                continue
            a, b = np.searchsorted(launch_thread, [index, index + 1])
            calls = np.flatnonzero(thread == mine)
            lo[calls] = a + np.searchsorted(launch_start[a:b], start[calls], side="left")
            hi[calls] = a + np.searchsorted(launch_start[a:b], end[calls], side="left")
    # each launch's kernels: [first, last) into the kernels sorted by correlation
    k_corr, k_name, k_ns, k_prefix = _kernels_by_launch(timeline)
    first, last = np.searchsorted(k_corr, launch_corr, "left"), np.searchsorted(k_corr, launch_corr, "right")
    launch_ns, launch_count = np.r_[0, np.cumsum(k_prefix[last] - k_prefix[first])], np.r_[0, np.cumsum(last - first)]
    gpu, launches = launch_ns[hi] - launch_ns[lo], launch_count[hi] - launch_count[lo]

    # rows in order of each signature's first call; per signature its kernels' ns by name
    distinct, first_call, inverse = np.unique(sig, return_index=True, return_inverse=True)
    calls_of = np.bincount(inverse, minlength=len(distinct))
    cpu_of, gpu_of, launches_of = (_sum_by(inverse, values, len(distinct)) for values in (end - start, gpu, launches))
    call_of_launch, launch = _spans(lo, hi)
    launch_of_kernel, kernel = _spans(first[launch], last[launch])
    pair_sig = inverse[call_of_launch[launch_of_kernel]]
    width = int(k_name.max()) + 1 if len(k_name) else 1
    pair = pair_sig * width + k_name[kernel]
    pairs, first_pair, pair_inverse = np.unique(pair, return_index=True, return_inverse=True)
    pair_ns = _sum_by(pair_inverse, k_ns[kernel], len(pairs))
    by_signature: dict[int, list[tuple[int, int, int]]] = {}
    for value, at, ns in zip(pairs.tolist(), first_pair.tolist(), pair_ns):
        by_signature.setdefault(value // width, []).append((at, value % width, ns))
    names_ = timeline.names
    out = []
    for row in np.argsort(first_call, kind="stable").tolist():
        name, dims, types, concrete = shaped.signatures[int(distinct[row])]
        heaviest = sorted(by_signature.get(row, ()), key=lambda item: (-item[2], item[0]))[:KERNELS_KEPT]
        out.append(OperatorShape(rank=rank, name=name, input_dims=dims, input_types=types, concrete=concrete,
                                 calls=int(calls_of[row]), cpu_ns=cpu_of[row], gpu_ns=gpu_of[row],
                                 launches=launches_of[row], kernels=tuple((names_[k], ns) for _, k, ns in heaviest)))
    out.sort(key=lambda r: (-r.gpu_ns, r.name))
    return tuple(out)


def _sum_by(group: Any, values: Any, count: int) -> list[int]:
    """Exact integer sums of `values` per group (bincount would sum in floats)."""
    import numpy as np
    if not len(group):
        return [0] * count
    order = np.argsort(group, kind="stable")
    grouped = group[order]
    bounds = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    sums = [0] * count
    for g, total in zip(grouped[bounds].tolist(), np.add.reduceat(values[order], bounds).tolist()):
        sums[g] = total
    return sums
