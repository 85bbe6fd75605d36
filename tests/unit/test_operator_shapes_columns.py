"""formats/torch_shapes.operator_shapes by columns gives the rows the rule gives when written as a loop
per call (below, as the reader had it): the outermost calls of each thread, their CPU time, the
kernels their launch calls launched (by correlation id), the heaviest kernels of each signature, the
rows in the same order. On real traces recorded with shapes and on random ones built to hit the edges
(nested, overlapping and equal calls, launches on other threads, several kernels per launch, ties)."""

import random
from array import array
from pathlib import Path

import pytest

from profilectl.formats import chrome_stream, torch_shapes
from profilectl.formats.chrome_events import ChunkSums
from profilectl.model.operators import KERNELS_KEPT, OperatorShape

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHAPED = [FIXTURES / "real/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
          FIXTURES / "real/kineto/torch1.9_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz",
          *sorted(p for p in (FIXTURES / "nvidia-h200-knows").rglob("*.pt.trace.json*")
                  if b"Input Dims" in p.read_bytes())]


def rows_by_loop(rank, partial):
    """The rule, one call at a time."""
    import bisect
    timeline = partial.timeline
    kernels = {}
    for c, k, n, a, b in zip(timeline.correlation, timeline.kind, timeline.name, timeline.start, timeline.end):
        if k == 0 and c >= 0:
            kernels.setdefault(c, []).append((n, b - a))
    threads = {}
    for index, key in enumerate(timeline.threads):
        mine = sorted((s, i, c) for i, (s, c, t) in enumerate(zip(timeline.api_start, timeline.api_correlation,
                                                                    timeline.api_thread)) if t == index)
        threads[key] = ([s for s, _, _ in mine], [c for _, _, c in mine])  # by start, then file order
    by_thread = {}
    shaped = partial.shaped
    for thread, start, end, sig in shaped.columns().tolist():
        by_thread.setdefault(shaped.threads[thread], []).append((*shaped.threads[thread], start, end, sig))
    kept = []
    for calls in by_thread.values():
        calls.sort(key=lambda c: (c[2], -c[3]))
        reach = None
        for call in calls:
            if reach is not None and call[2] < reach and call[3] <= reach:
                continue
            kept.append(call)
            reach = call[3] if reach is None else max(reach, call[3])
    sums = {}
    for pid, tid, start, end, sig in kept:
        row = sums.setdefault(sig, [0, 0, 0, 0, {}])
        row[0] += 1
        row[1] += end - start
        if (pid, tid) not in threads:
            continue
        begins, correlations = threads[(pid, tid)]
        for k in range(bisect.bisect_left(begins, start), bisect.bisect_left(begins, end)):
            for name, ns in kernels.get(correlations[k], ()):
                row[2] += ns
                row[3] += 1
                row[4][name] = row[4].get(name, 0) + ns
    out = []
    for sig, (calls, cpu, gpu, launches, by_kernel) in sums.items():
        name, dims, types, concrete = shaped.signatures[sig]
        heaviest = sorted(by_kernel.items(), key=lambda item: -item[1])[:KERNELS_KEPT]
        out.append(OperatorShape(rank=rank, name=name, input_dims=dims, input_types=types, concrete=concrete,
                                 calls=calls, cpu_ns=cpu, gpu_ns=gpu, launches=launches,
                                 kernels=tuple((timeline.names[k], ns) for k, ns in heaviest)))
    out.sort(key=lambda r: (-r.gpu_ns, r.name))
    return tuple(out)


@pytest.mark.parametrize("path", SHAPED, ids=lambda p: p.name)
def test_columns_equal_the_loop_on_real_traces(path):
    partial = chrome_stream.read_trace(path, workers=1)
    assert partial.shaped, "a trace recorded with shapes"
    by_columns = torch_shapes.operator_shapes("r", partial)
    assert by_columns and by_columns == rows_by_loop("r", partial)
    assert any(row.gpu_ns and row.kernels for row in by_columns)


def random_partial(rng: random.Random) -> ChunkSums:
    partial = ChunkSums()
    timeline = partial.timeline
    timeline.names.extend(f"k{i}" for i in range(rng.randint(1, 6)))
    partial.shaped.signatures.extend(("aten::mm", ((i,),), ("float",), ()) for i in range(rng.randint(1, 5)))
    keys = [(1, t) for t in range(rng.randint(1, 4))]
    partial.shaped.threads.extend(rng.sample(keys, len(keys)))
    timeline.threads.extend(keys[:rng.randint(0, len(keys))])  # some threads launch nothing
    correlation = 0
    for _ in range(rng.randint(0, 60)):
        start = rng.randrange(0, 400, rng.choice((1, 10, 50)))  # coarse grids: equal starts and ends
        end = start + rng.randrange(0, 120, rng.choice((1, 20)))
        partial.shaped.calls.extend((rng.randrange(len(keys)), start, end, rng.randrange(len(partial.shaped.signatures))))
    for _ in range(rng.randint(0, 80)):
        correlation += rng.choice((0, 1, 1, 2))  # repeated ids, and ids without kernels
        if timeline.threads:
            start = rng.randrange(0, 520, rng.choice((1, 10)))
            timeline.api_start.append(start)
            timeline.api_end.append(start + 3)
            timeline.api_correlation.append(correlation)
            timeline.api_thread.append(rng.randrange(len(timeline.threads)))
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            start = rng.randrange(0, 600)
            timeline.start.append(start)
            timeline.end.append(start + rng.choice((5, 5, 10, rng.randrange(0, 50))))  # equal totals: ties
            timeline.kind.append(rng.choice((0, 0, 0, 1)))
            timeline.name.append(rng.randrange(len(timeline.names)))
            timeline.correlation.append(rng.choice((correlation, correlation, -1)))
            timeline.stream.append(0)
    return partial


def test_columns_equal_the_loop_on_random_calls():
    rng = random.Random(38)
    for _ in range(3000):
        partial = random_partial(rng)
        assert torch_shapes.operator_shapes("r", partial) == rows_by_loop("r", partial)


def test_an_empty_timeline_still_counts_calls_and_cpu_time():
    partial = ChunkSums()
    partial.shaped.signatures.append(("aten::mm", ((2, 2),), ("float",), ()))
    partial.shaped.threads.extend([(1, 1), (1, 2)])
    partial.shaped.calls.extend([0, 0, 100, 0, 0, 10, 20, 0, 1, 5, 6, 0])
    row, = torch_shapes.operator_shapes("r", partial)
    assert (row.calls, row.cpu_ns, row.gpu_ns, row.launches, row.kernels) == (2, 101, 0, 0, ())
    assert isinstance(partial.timeline.start, array)
