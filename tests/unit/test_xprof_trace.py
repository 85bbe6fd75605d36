"""A real trace of current xprof: JAX on 8 AMD MI300X GPUs driven by one process (TraceLens's capture,
converted by xprof 2.24.2; provenance in tests/fixtures/README.md). Its derived lines are named
`XLA Ops - from #16`, its host's launch calls (`hipModuleLaunchKernel` ...) sit on `/host:CPU` with
the `correlation_id` of their kernel (and that kernel's `hlo_op`), and each GPU is a rank of its own.
Every expected number is computed here from the raw JSON with Decimal, not by profilectl."""

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal

import pytest

from profilectl.backends import READERS
from profilectl.formats import jax_trace
from profilectl.formats.reader import claim
from support import FIXTURES, REPO

TRACE = "xla-trace/xprof-mi300x-8gpu/tw003.trace.json.gz"
OPERATOR_LINES = ("XLA Ops", "XLA Modules", "Framework Ops", "TensorFlow Ops")


def ns(value):
    return int((Decimal(str(value)) * 1000).to_integral_value())


@pytest.fixture(scope="module")
def raw():
    with gzip.open(FIXTURES / TRACE, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    complete = [(processes.get(e["pid"], ""), threads.get((e["pid"], e.get("tid")), ""), e) for e in events
                if e.get("ph") == "X"]
    return complete


def test_it_goes_to_the_xla_reader(fixtures):
    path = fixtures / TRACE
    assert jax_trace.is_xla_trace(path)
    (reader, files), = claim([path], READERS)
    assert reader.kind == "xla-trace"


def test_each_device_is_a_rank_with_its_own_kernels_and_launches(fixtures, raw):
    tables = jax_trace.read(fixtures / TRACE)
    by_device = defaultdict(lambda: [0, 0, set()])
    for process, thread, e in raw:
        if process.startswith("/device:") and thread.startswith("Stream #"):
            row = by_device[f"tw003/{process[len('/device:'):]}"]
            row[0] += 1
            row[1] += ns(e["dur"])
            row[2].add(int(e["args"]["correlation_id"]))
    assert len(by_device) == 8
    assert {r.rank: (r.dispatches, int(r.total_ns)) for r in tables.ranks} == {
        rank: (n, total) for rank, (n, total, _) in by_device.items()}
    launches = {int(e["args"]["correlation_id"]) for process, _, e in raw
                if process == "/host:CPU" and "correlation_id" in (e.get("args") or {})}
    for timeline in tables.timelines:
        mine = by_device[timeline.rank][2]
        assert set(timeline.api_correlation.tolist()) == mine & launches  # its own launch calls, no other's
        assert timeline.host_activity is not None  # the process's host events


def test_operators_come_from_the_derived_lines_whatever_their_stream(fixtures, raw):
    expected = defaultdict(lambda: [0, 0])
    for process, thread, e in raw:
        base = thread.split(" - from #")[0]
        if process.startswith("/device:") and base in OPERATOR_LINES:
            expected[e["name"]][0] += 1
            expected[e["name"]][1] += ns(e["dur"])
    tables = jax_trace.read(fixtures / TRACE)
    assert {n: [s.calls, int(s.total)] for n, s in tables.operators.items()} == dict(expected)
    assert "hipModuleLaunchKernel" not in tables.operators  # a launch call is not an HLO op
    assert not any("XLA:CPU" in note for note in tables.notes)


def test_launch_calls_on_the_host_are_the_api_table(fixtures, raw):
    expected = defaultdict(lambda: [0, 0])
    for process, _, e in raw:
        if process == "/host:CPU" and "correlation_id" in (e.get("args") or {}):
            expected[e["name"]][0] += 1
            expected[e["name"]][1] += ns(e["dur"])
    tables = jax_trace.read(fixtures / TRACE)
    assert {n: [s.calls, int(s.total)] for n, s in tables.api.items()} == dict(expected)
    assert expected["hipModuleLaunchKernel"][0] == 119


def _busy_percent(intervals):
    intervals.sort()
    busy, end = 0, None
    for a, b in intervals:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    span = max(b for _, b in intervals) - intervals[0][0]
    return 100.0 * busy / span


def test_the_report_gives_each_gpu_its_own_busy_time(fixtures, raw):
    """Each GPU's busy share is its own (2.9-3.9 %), not the union of the eight (8.9 %)."""
    intervals = defaultdict(list)
    for process, thread, e in raw:
        if process.startswith("/device:") and thread.startswith("Stream #"):
            start = ns(e["ts"])
            intervals[f"tw003/{process[len('/device:'):]}"].append((start, start + ns(e["dur"])))
    expected = {rank: _busy_percent(spans) for rank, spans in intervals.items()}
    assert 2.8 < min(expected.values()) and max(expected.values()) < 4.0
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(fixtures / TRACE), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    got = {row["rank"]: row["busy_percent"] for row in report["timeline"]["ranks"]}
    assert got.keys() == expected.keys()
    for rank, percent in expected.items():
        assert got[rank] == pytest.approx(percent, abs=1e-6)
    diagnosed = report["diagnosis"]["ranks"]
    assert all(rank["host_recorded"] for rank in diagnosed)  # the launch calls and the host's threads
    assert not {cause["cause"] for rank in diagnosed for cause in rank["whole"]} & {"untraced", "unrecorded"}
