"""The Chrome-trace reader by columns (formats/chrome_columns.py: aggregate_columns, and chrome_tree.py: tree_sums'
nesting without the walk) gives exactly what the per-event loop and torch's walk give: every sum,
every CPU event of the operator tree, every timeline column, names in the same order. Checked on
every real trace among the fixtures (cut into small chunks, so most go through the columns) and on
random event trees, nested and not (the columns must hand those to the walk)."""

import gzip
import json
import random
from array import array
from pathlib import Path

import pytest

from profilectl.formats import (chrome_aggregate, chrome_columns, chrome_decode, chrome_events, chrome_io, chrome_stream,
                               chrome_tree)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACES = sorted(p for p in FIXTURES.rglob("*.json*") if p.name.endswith((".json", ".json.gz"))
                and chrome_io.is_gzip(p) or p.name.endswith(".json") and b'"traceEvents"' in p.read_bytes()[:1 << 16])
TRACES = [p for p in TRACES if b"traceEvents" in (gzip.open(p).read() if chrome_io.is_gzip(p) else p.read_bytes())
          and p.relative_to(FIXTURES).parts[0] != "real"]  # the corpus of real/ has its own test (test_real_corpus)


def test_the_fixtures_hold_real_traces():
    assert len(TRACES) >= 15


def _events_array(path: Path) -> bytes:
    raw = gzip.open(path).read() if chrome_io.is_gzip(path) else path.read_bytes()
    return json.dumps(json.loads(raw)["traceEvents"]).encode()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_columns_equal_the_loop_on_real_traces(path):
    data = _events_array(path)
    loop = chrome_aggregate.aggregate(str(path), chrome_decode.decoder(True)(data))
    events = chrome_decode.columnar_decoder()(data)
    if chrome_decode.needs_exact(data) or events is None:
        return  # the exact decoder, or a legacy layout: the loop reads it (test_exact_time, test_kineto_generations)
    columns = chrome_columns.aggregate_columns(events, text=data)  # as read_chunk gives it
    assert columns is not None
    assert columns == loop
    assert list(columns.kernels) == list(loop.kernels) and columns.names == loop.names
    assert list(columns.threads) == list(loop.threads)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_reading_in_small_chunks_equals_the_stdlib_loop(path):
    fast = chrome_stream.read_trace(path, fast=True, workers=1, chunk=16 << 10)
    slow = chrome_stream.read_trace(path, fast=False, workers=1, chunk=16 << 10)
    assert fast == slow
    assert chrome_tree.tree_sums(fast) == _walked(slow)
    assert [list(d.items()) for d in chrome_tree.tree_sums(fast)] == [list(d.items()) for d in _walked(slow)]


def test_most_real_traces_take_the_columns():
    taken = sum(chrome_decode.columnar_decoder()(_events_array(p)) is not None for p in TRACES)
    assert taken >= len(TRACES) - 4  # the torch 1.8/1.9 layouts and the legacy profiler's may not


def _walked(partial):
    """tree_sums by torch's walk alone."""
    by_kind = ({}, {}, {})
    launched = chrome_tree._launched_columns(partial.timeline)
    for key, thread in partial.threads.items():
        starts, prefix = launched.get(key, (None, None))
        chrome_tree._walk(by_kind, thread, chrome_tree._between(starts, prefix))
    names = partial.names
    return ({names[i]: s for i, s in by_kind[chrome_events.TREE_OPERATOR].items()},
            {names[i]: s for i, s in by_kind[chrome_events.TREE_ANNOTATION].items()})


def _random_thread(rng: random.Random, nested: bool) -> chrome_events.ThreadEvents:
    """Events in a thread: nested ranges (names from a few, so only children of one name occur),
    with runtime calls; unless `nested`, some events of no duration and some that overlap."""
    thread = chrome_events.ThreadEvents()

    def add(start: int, end: int) -> None:
        thread.start.append(start)
        thread.end.append(end)
        thread.name.append(rng.randrange(4))
        thread.operator.append(rng.choice((0, 1, 1, 2)))

    def fill(start: int, end: int, depth: int) -> None:
        t = start
        while t < end and depth < 6:
            length = rng.randint(1, max(1, (end - t)))
            if rng.random() < 0.3:
                length = end - t  # an only child spanning its parent
            add(t, t + length)
            if length > 1 and rng.random() < 0.7:
                fill(t + rng.randint(0, 1), t + length - rng.randint(0, 1), depth + 1)
            t += length + rng.randint(0, 2)
    fill(0, 400, 0)
    if not nested:
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, 400)
            add(at, at + rng.choice((0, 0, 3, 50)))
    order = list(range(len(thread.start)))
    rng.shuffle(order)  # any file order: torch sorts by (start, -end)
    shuffled = chrome_events.ThreadEvents()
    for i in order:
        shuffled.start.append(thread.start[i])
        shuffled.end.append(thread.end[i])
        shuffled.name.append(thread.name[i])
        shuffled.operator.append(thread.operator[i])
    return shuffled


@pytest.mark.parametrize("block", [1 << 18, 7])
@pytest.mark.parametrize("nested", [True, False])
def test_tree_by_columns_equals_the_walk_on_random_trees(nested, block, monkeypatch):
    """Also with threads cut into blocks of a few events at their top-level events."""
    monkeypatch.setattr(chrome_tree, "TREE_BLOCK", block)
    rng = random.Random(26)
    for _ in range(300):
        partial = chrome_events.ChunkSums(names=["a", "b", "c", "d"])
        partial.threads[(1, 1)] = _random_thread(rng, nested)
        partial.threads[(1, 2)] = _random_thread(rng, nested)
        timeline = partial.timeline
        for thread_index, key in enumerate(partial.threads):
            timeline.threads.append(key)
            for start in partial.threads[key].start[:20]:
                correlation = len(timeline.api_correlation)
                timeline.api_start.append(start)
                timeline.api_end.append(start + 1)
                timeline.api_correlation.append(correlation)
                timeline.api_thread.append(thread_index)
                timeline.start.append(1000 + correlation)
                timeline.end.append(1000 + correlation + rng.randint(1, 9))
                timeline.correlation.append(correlation)
        by_columns = chrome_tree.tree_sums(partial)
        walked = _walked(partial)
        assert [list(d.items()) for d in by_columns] == [list(d.items()) for d in walked]


def test_strictly_nested_events_take_the_columns_and_others_do_not():
    import numpy as np
    nested = (array("q", [0, 1, 2, 5]), array("q", [10, 4, 3, 9]))
    assert chrome_tree._tree_columns(*(np.frombuffer(a, dtype=np.int64) for a in nested)) is not None
    overlapping = (array("q", [0, 5]), array("q", [10, 15]))
    assert chrome_tree._tree_columns(*(np.frombuffer(a, dtype=np.int64) for a in overlapping)) is None
    empty = (array("q", [0, 5]), array("q", [10, 5]))
    assert chrome_tree._tree_columns(*(np.frombuffer(a, dtype=np.int64) for a in empty)) is None


def test_a_sum_of_squares_beyond_64_bits_stays_exact():
    hour_ns = 3_600 * 10**9
    events = json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": i * 4e9,
                          "dur": hour_ns / 1000, "args": {"correlation": i}} for i in range(3)]).encode()
    partial = chrome_columns.aggregate_columns(chrome_decode.columnar_decoder()(events))
    assert partial.kernels["k"] == [3, 3 * hour_ns, 3 * hour_ns * hour_ns, hour_ns, hour_ns]


def test_the_legacy_profilers_layout_and_odd_types_go_the_general_way(tmp_path):
    """No "cat" (torch without Kineto: operators and kernels told apart by pid), a string time, an
    event without "ph": the columns refuse the chunk and the loop reads it, with the same numbers."""
    legacy = [{"ph": "X", "name": "aten::mm", "pid": "CPU functions", "tid": 1, "ts": 1.0, "dur": 5.0},
              {"ph": "X", "name": "gemm", "pid": "CUDA functions", "tid": 2, "ts": 2.0, "dur": 3.0}]
    odd = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "1.5", "dur": 2.0},
           {"cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0}]
    for events in (legacy, odd):
        data = json.dumps(events).encode()
        decoded = chrome_decode.columnar_decoder()(data)
        assert decoded is None or chrome_columns.aggregate_columns(decoded, None, data) is None
        path = tmp_path / "trace.json"
        path.write_text(json.dumps({"traceEvents": events * 40_000}))
        assert chrome_stream.read_trace(path, workers=1, chunk=64 << 10) == \
            chrome_stream.read_trace(path, fast=False, workers=1, chunk=64 << 10)
    assert chrome_stream.read_trace(path, workers=1, chunk=64 << 10).kernels["k"][0] == 40_000  # no "ph": not an "X"
