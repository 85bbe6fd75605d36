"""Exact time: a trace's timestamps are integers of its own unit (ns fractions of µs) from the first
byte to the last table, with no float round trip. Checked on Holistic Trace Analysis's real
ns_resolution_trace (epoch µs with 3 decimals: a double spaces such numbers 0.25 µs apart), against
a hand computation with Python's decimal from the raw text."""

import gzip
import json
from decimal import Decimal
from pathlib import Path

import test_torch_trace

from profilectl.analysis.intervals import gap_min_ns
from profilectl.analysis.timeline import analyse
from profilectl.formats import chrome_stream, chrome_tree, torch_trace

NS_TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "hta" / "ns_resolution_rank-0.pt.trace.json.gz"
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def raw_events():
    with gzip.open(NS_TRACE, "rt") as fh:
        return json.loads(fh.read(), parse_float=Decimal)["traceEvents"]


def ns(value):
    return int(Decimal(value) * 1000)  # exact: the text has at most 3 decimals


def union(intervals):
    blocks = []
    for start, end in sorted(intervals):
        if blocks and start <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], end)
        else:
            blocks.append([start, end])
    return blocks


def test_the_fixture_needs_more_than_a_double():
    events = raw_events()
    stamps = [e["ts"] for e in events if e.get("ph") == "X"]
    assert any(float(ts) != ts for ts in stamps)  # a float would not hold these
    assert sum(1 for ts in stamps if ns(Decimal(float(ts))) != ns(ts)) > len(stamps) // 2


def test_gpu_activities_span_gaps_and_steps_exact_to_the_ns():
    events = raw_events()
    gpu = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e.get("ph") == "X" and e.get("cat") in GPU]
    tables = torch_trace.read(NS_TRACE)
    timeline, = tables.timelines
    assert sorted(zip(timeline.start.tolist(), timeline.end.tolist())) == sorted(gpu)
    result = analyse(tables.timelines)
    assert result is not None
    row = result.merged
    blocks = union(gpu)
    gaps = [b[0] - a[1] for a, b in zip(blocks, blocks[1:])]
    assert row.span_ns == max(e for _, e in gpu) - min(s for s, _ in gpu)
    assert row.busy_ns == sum(e - s for s, e in blocks)
    assert row.largest_gap_ns == max(gaps)
    assert row.gap_total_ns == sum(g for g in gaps if g >= gap_min_ns())
    # steps: the ProfilerStep#N ranges (CPU side here), wall and GPU busy time inside each
    steps = {int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert {s.step for s in result.steps} == set(steps)
    for step in result.steps:
        low, high = steps[step.step]
        assert step.wall_ns == high - low
        assert step.gpu_busy_ns == sum(max(0, min(e, high) - max(s, low)) for s, e in blocks)


def test_operator_self_times_exact_to_the_ns(monkeypatch):
    events = raw_events()
    # torch's key_averages, written again in test_torch_trace, on exact integer ns of the raw text
    monkeypatch.setattr(test_torch_trace, "ns", ns)
    expected = test_torch_trace.torch_key_averages(events)
    tables = torch_trace.read(NS_TRACE)
    found = {name: (s.calls, s.total, s.self_total) for name, s in tables.operators.items()}
    assert found == expected
    assert any(int(total) % 1000 for _, total, _ in expected.values())  # ns fractions are there


def test_kernel_totals_exact_to_the_ns():
    events = raw_events()
    expected: dict[str, list[int]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            sums = expected.setdefault(e["name"], [0, 0])
            sums[0] += 1
            sums[1] += ns(e["dur"])
    tables = torch_trace.read(NS_TRACE)
    assert {name: [s.calls, int(s.total)] for name, s in tables.kernels.items()} == expected


def test_exactness_does_not_depend_on_the_chunking_or_the_decoder():
    whole = chrome_stream.read_trace(NS_TRACE, workers=1)
    for fast in (True, False):
        small = chrome_stream.read_trace(NS_TRACE, fast=fast, workers=1, chunk=64 << 10)
        assert sorted(small.timeline.start) == sorted(whole.timeline.start)
        assert chrome_tree.operator_sums(small) == chrome_tree.operator_sums(whole)
