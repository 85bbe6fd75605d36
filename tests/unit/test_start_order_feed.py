"""The timeline made while a trace is parsed (StartOrderFeed) equals the walk over its columns
afterwards, and where the trace's order breaks the feed's assumption it gives up and the walk
makes the figures as before."""

import csv

import numpy as np
import pytest

from profilectl.analysis.idle import HtaStream, hta_breakdown
from profilectl.analysis.idle import analyse as idle_analyse
from profilectl.model.timeline import KERNEL, rank_timeline
from profilectl.analysis.rank_stream import RankStream, StartOrderFeed, analyse_rank
from profilectl.analysis.timeline import analyse
from profilectl.backends import READERS
from profilectl.formats import polars_csv
from profilectl.formats.reader import read_path

NAMES = ["gemm", "relu", "ncclAllReduce_sum", "softmax"]


def columns(rng, n, disorder):
    start = np.cumsum(rng.integers(0, 25_000, size=n)) + 10**15
    if disorder == "local":  # a few rows out of place, as rocprofv3 writes completions
        start[rng.random(n) < 0.2] -= 40_000
    elif disorder == "far":  # a late row that belongs batches back
        start[n - 10] = start[n // 3]
    start[200:240] = start[200]  # a run of equal starts
    end = start + rng.integers(0, 20_000, size=n)
    end[rng.random(n) < 0.01] += 300_000  # long ones: blocks span batches
    if disorder == "backwards":
        end[n // 2] = start[n // 2] - 1
    name = rng.integers(0, 2, size=n).astype(np.int16)
    name[n // 2:] = rng.integers(0, 4, size=n - n // 2)  # a collective first seen half way through
    stream = rng.integers(0, 3, size=n).astype(np.int8)
    correlation = np.arange(1, n + 1, dtype=np.int64)
    return start, end, name, stream, correlation


@pytest.mark.parametrize("disorder", ["none", "local", "far", "backwards"])
@pytest.mark.parametrize("seed", range(3))
def test_the_feed_equals_the_walk_over_the_columns(disorder, seed):
    rng = np.random.default_rng(seed)
    n = 6_000
    start, end, name, stream, correlation = columns(rng, n, disorder)
    api_correlation = np.arange(1, n + 1, 2, dtype=np.int64)  # half the kernels linked to a launch call
    api_start = start[::2] - rng.integers(1_000, 50_000, size=len(api_correlation))
    api_end = api_start + rng.integers(100, 8_000, size=len(api_correlation))
    streams = ["Agent 4:1", "Agent 4:2", "Agent 4:3"]
    timeline = rank_timeline("0", None, start=start, end=end, stream=stream, kind=np.zeros(n, dtype=np.int8),
                             name=name, correlation=correlation, names=NAMES, streams=streams, api_start=api_start,
                             api_end=api_end, api_correlation=api_correlation)
    feed = StartOrderFeed(RankStream((), api_start, api_end, api_correlation, capacity=n),
                          HtaStream((api_correlation, api_start)), KERNEL)  # ids already sorted
    at = 0
    while at < n:  # batches of uneven sizes, the names known so far with each
        size = int(rng.integers(1, 900))
        part = slice(at, at + size)
        seen = int(name[:at + size].max()) + 1
        feed.add(start[part], end[part], stream[part], name[part], correlation[part], NAMES[:seen])
        at += size
    figures = feed.finish("0", None, NAMES, streams)
    assert feed.given_up == (disorder in ("far", "backwards"))
    if feed.given_up:
        assert figures is None
        assert analyse_rank(timeline)[0].span_ns > 0  # the walk over the columns makes them instead
        return
    assert figures is not None
    row, gaps, blocks = analyse_rank(timeline, chunk_rows=n)  # the whole trace as one chunk
    assert figures.timeline[0] == row and figures.timeline[1] == gaps
    assert all(np.array_equal(a, b) for a, b in zip(figures.timeline[2], blocks))
    assert figures.hta == hta_breakdown(timeline)
    assert row.communication_ns > 0 and row.launch.short_kernel_basis == "launch call" and gaps


def write_trace(path, rows):
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Kind", "Agent_Id", "Queue_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp",
                      "End_Timestamp"])
        for i, (queue, name, start, end) in enumerate(rows):
            out.writerow(["KERNEL_DISPATCH", "Agent 4", queue, name, i + 1, start, end])


@pytest.mark.parametrize("late_row,launch_calls", [(False, False), (True, False), (False, True)])
def test_the_reader_feeds_the_timeline_while_it_parses(tmp_path, monkeypatch, late_row, launch_calls):
    """A kernel trace read by polars in batches: its timeline is made during the parse (the rank's
    figures are kept on it), unless a row belongs several batches back, where the walk afterwards
    makes them. Either way the figures equal the csv module's reading."""
    rng = np.random.default_rng(11)
    t = 1_550_151_853_029_637
    rows = []
    for i in range(20_000):
        t += int(rng.integers(0, 40_000))
        rows.append((int(rng.integers(1, 4)), ["gemm", "relu", "ncclAllReduce_sum"][int(rng.integers(0, 3))],
                     t - int(rng.integers(0, 5_000)), t + int(rng.integers(0, 60_000))))
    if late_row:
        rows.append((1, "gemm", rows[100][2], rows[100][2] + 10))
    folder = tmp_path / "trace" / "host"
    folder.mkdir(parents=True)
    write_trace(folder / "11_kernel_trace.csv", rows)
    if launch_calls:  # every other kernel's launch call (HIP API), for the launch and HTA figures
        (folder / "11_hip_api_trace.csv").write_text(
            '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n' +
            "".join(f'"HIP_RUNTIME_API","hipLaunchKernel",11,11,{i + 1},{start - 30_000},{start - 2_000}\n'
                    for i, (_, _, start, _) in enumerate(rows) if i % 2 == 0))
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 3_000)
    results = []
    for threshold in (0, 1 << 40):  # polars in batches / the csv module
        monkeypatch.setattr(polars_csv, "FAST_PATH_MIN_BYTES", threshold)
        tables = read_path(tmp_path / "trace", READERS)
        (timeline,) = tables.timelines
        results.append((timeline.streamed, analyse(tables.timelines), idle_analyse(tables.timelines)))
    (fed, by_feed, idle_fed), (unfed, by_walk, idle_walked) = results
    assert unfed is None
    assert (fed is None) == late_row
    assert by_feed == by_walk and idle_fed == idle_walked
    assert any(row.host_wait_ns for row in idle_fed[0].hta) == launch_calls
    assert (by_feed.merged.launch.short_kernel_basis == "launch call") == launch_calls
    assert by_feed is not None and by_feed.merged.communication_ns > 0 and by_feed.gaps


def test_an_activity_ending_before_it_starts_is_no_crash():
    """A block whose reach is an earlier block's (its only activity ends before it starts, a clock
    error in the trace) names its own activity instead of failing on an empty search."""
    timeline = rank_timeline("0", None, start=np.array([0, 20]), end=np.array([10, 5]), stream=[0, 0], kind=[0, 0],
                             name=[0, 1], names=["a", "b"], streams=["s"])
    row, _, blocks = analyse_rank(timeline)
    assert row.span_ns == 10 and list(blocks[0]) == [0, 20]


def test_deepest_concurrency_with_a_zero_length_activity_last_of_equal_starts():
    """Two activities open at 5 although the last of the three starting at 5 ends there at once."""
    for start, end in (([0, 5, 5], [10, 10, 5]), ([5, 5, 5], [10, 10, 5]), ([5, 5], [5, 5])):
        timeline = rank_timeline("0", None, start=np.array(start), end=np.array(end), stream=[0] * len(start),
                                 kind=[0] * len(start), name=[0] * len(start), names=["a"], streams=["s"])
        deepest = 0 if max(end) == min(start) else 2
        assert analyse_rank(timeline)[0].max_concurrency == deepest, (start, end)
