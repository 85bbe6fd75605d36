"""The timeline from numpy columns: the one-sort concurrency sweep gives the numbers of the joint
sort of starts and ends it replaced, and the polars one-pass CSV reader gives the csv module's
tables and timeline, on traces out of start order, with ties, zero-length activity and many streams."""

import csv

import numpy as np
import pytest

from profilectl.analysis.idle import hta_breakdown
from profilectl.analysis.intervals import busy_union, union
from profilectl.model.timeline import rank_timeline
from profilectl.analysis.rank_stream import analyse_rank
from profilectl.analysis.timeline import analyse
from profilectl.formats import polars_csv
from profilectl.formats.reader import read_path
from profilectl.backends import READERS


def reference_depth(start, end):
    """The sweep the analysis used before: starts and ends sorted together, ends first at a tie."""
    points = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((delta, points))
    times, depth = points[order], np.cumsum(delta[order])
    return int((np.diff(times) * (depth[:-1] >= 2)).sum()), int(depth.max())


@pytest.mark.parametrize("seed", range(6))
def test_concurrency_equals_the_joint_sort(seed):
    rng = np.random.default_rng(seed)
    n = 5_000
    start = rng.integers(0, 200_000, size=n)
    if seed % 2:
        start = np.sort(start)  # in start order: the no-copy path
    duration = rng.integers(0, 300, size=n) * (rng.random(n) > 0.1)  # a tenth last no time at all
    end = start + duration
    timeline = rank_timeline("0", None, start=start, end=end, stream=rng.integers(0, 4, size=n),
                             kind=np.zeros(n, np.int8), name=rng.integers(0, 9, size=n).astype(np.int32),
                             names=[f"k{i}" for i in range(9)], streams=["a", "b", "c", "d"])
    row, _, _ = analyse_rank(timeline)
    assert (row.concurrent_ns, row.max_concurrency) == reference_depth(start, end)


@pytest.mark.parametrize("chunk_rows", [5, 1 << 18])
def test_the_deepest_moment_with_runs_of_equal_starts(chunk_rows):
    """Starts on a coarse grid (runs of equal starts, ends on the same grid): the deepest moment is
    counted after the last start of a run, chunk boundaries anywhere."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(2, 40))
        start = np.sort(rng.integers(0, 8, size=n)) * 100
        end = start + rng.integers(0, 4, size=n) * 100
        timeline = rank_timeline("0", None, start=start, end=end, stream=np.zeros(n, np.int32),
                                 kind=np.zeros(n, np.int8), name=np.zeros(n, np.int32), names=["k"], streams=["a"])
        row, _, _ = analyse_rank(timeline, chunk_rows=chunk_rows)
        assert (row.concurrent_ns, row.max_concurrency) == reference_depth(start, end), (start, end)


def write_trace(path, rng, n):
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Kind", "Agent_Id", "Queue_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp",
                      "End_Timestamp"])
        t = 1_550_151_853_029_637  # boot-time ns as rocprofv3 writes them (the csv module reads floats: < 2**53)
        for i in range(n):
            t += int(rng.integers(0, 40_000))
            queue = int(rng.integers(1, 4))
            name = ["gemm", "relu", "ncclAllReduce_sum", 'odd, "quoted" name'][int(rng.integers(0, 4))]
            out.writerow(["KERNEL_DISPATCH", "Agent 4", queue, name, i + 1, t - int(rng.integers(0, 5_000)),
                          t + int(rng.integers(0, 60_000))])


def test_polars_one_pass_equals_the_csv_module(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    folder = tmp_path / "trace" / "host"
    folder.mkdir(parents=True)
    write_trace(folder / "11_kernel_trace.csv", rng, 40_000)
    write_trace(folder / "12_kernel_trace.csv", rng, 30_000)
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 7_000)  # several batches, names first seen in later ones
    results = []
    for threshold in (0, 1 << 40):  # polars for every file / the csv module for every file
        monkeypatch.setattr(polars_csv, "FAST_PATH_MIN_BYTES", threshold)
        tables = read_path(tmp_path / "trace", READERS)
        kernels = {k: (s.calls, s.total, s.minimum, s.maximum, round(s.std, 6)) for k, s in tables.kernels.items()}
        results.append((kernels, analyse(tables.timelines)))
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    assert results[0][1].merged.communication_ns > 0 and results[0][1].merged.streams == 6


@pytest.mark.parametrize("seed", range(4))
def test_chunked_analysis_equals_the_whole(seed):
    """The rank's figures chunk by chunk (the carried state of RankStream) equal one chunk of the
    whole trace: boundaries fall inside overlapping intervals, inside runs of equal starts, between
    a collective and the compute under it, on traces in and out of start order, with copies and with
    kernels linked to their launch calls."""
    rng = np.random.default_rng(seed)
    n = 3_000
    start = np.cumsum(rng.integers(0, 25_000, size=n)) + 10**15
    start[rng.random(n) < 0.2] -= 2_000  # some out of order
    if seed % 2:
        start = np.sort(start)
    start[100:140] = start[100]  # a run of equal starts
    end = start + rng.integers(0, 20_000, size=n) * (rng.random(n) > 0.05)
    end[rng.random(n) < 0.01] += 200_000  # long ones: blocks and pieces span chunks
    kind = (rng.random(n) < 0.1).astype(np.int8)
    names = ["gemm", "relu", "ncclAllReduce", "copy"]
    name = rng.integers(0, 3, size=n).astype(np.int32)
    name[kind == 1] = 3
    if seed % 2:  # collectives only in the second half: compute blocks before them are not kept
        name[:n // 2][name[:n // 2] == 2] = 0
    correlation = np.arange(n, dtype=np.int64) if seed >= 2 else None
    api_start = start - rng.integers(1_000, 50_000, size=n) if seed >= 2 else ()
    api_end = api_start + rng.integers(100, 8_000, size=n) if seed >= 2 else ()
    api_correlation = np.arange(0, n, 2, dtype=np.int64) if seed >= 2 else ()  # half of them linked
    if seed >= 2:
        api_start, api_end = api_start[::2], api_end[::2]
    timeline = rank_timeline("0", None, start=start, end=end, stream=rng.integers(0, 5, size=n), kind=kind,
                             name=name, correlation=correlation, names=names, streams=list("abcde"),
                             api_start=api_start, api_end=api_end, api_correlation=api_correlation)
    whole = analyse_rank(timeline, chunk_rows=n)
    assert whole[0].communication_ns > 0 and whole[0].memory_ns > 0 and whole[1]
    assert (whole[0].launch.short_kernel_basis == "launch call") == (seed >= 2)
    assert (whole[0].concurrent_ns, whole[0].max_concurrency) == reference_depth(start, end)
    assert all(np.array_equal(a, b) for a, b in zip(union(start, end), whole[2]))
    for chunk in (1, 2, 7, 64, 999):
        part = analyse_rank(timeline, chunk_rows=chunk)
        assert part[0] == whole[0] and part[1] == whole[1]
        assert all(np.array_equal(a, b) for a, b in zip(part[2], whole[2]))
        assert hta_breakdown(timeline, chunk_rows=chunk) == hta_breakdown(timeline, chunk_rows=n)
        assert all(np.array_equal(a, b) for a, b in zip(busy_union(timeline, chunk_rows=chunk), whole[2]))
    assert any(row.host_wait_ns for row in hta_breakdown(timeline)) == (seed >= 2)


def test_prefix_lengths_chunk_by_chunk_equal_the_cumulative_sum():
    from profilectl.analysis.timeline import _prefix_lengths
    rng = np.random.default_rng(5)
    start = np.cumsum(rng.integers(1, 100, size=1_000))
    end = start + rng.integers(0, 50, size=1_000)
    upto = rng.integers(0, 1_001, size=300)
    done = np.concatenate([[0], np.cumsum(end - start)])
    for chunk in (1, 3, 64, 1_000, 5_000):
        assert np.array_equal(_prefix_lengths(start, end, upto, chunk_rows=chunk), done[upto])


def test_a_second_stream_first_seen_in_a_later_batch(tmp_path, monkeypatch):
    """One queue for the first batches (kept as one shared value), a second one later: the rows
    before it keep their stream, as the csv module reads them."""
    folder = tmp_path / "trace" / "host"
    folder.mkdir(parents=True)
    with open(folder / "11_kernel_trace.csv", "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Kind", "Agent_Id", "Queue_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp",
                      "End_Timestamp"])
        for i in range(20_000):
            out.writerow(["KERNEL_DISPATCH", "Agent 4", 1 if i < 15_000 else 2, f"k{i % 7}", i + 1,
                          1_000_000 + 3_000 * i, 1_000_000 + 3_000 * i + 5_000])
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 4_000)
    results = []
    for threshold in (0, 1 << 40):
        monkeypatch.setattr(polars_csv, "FAST_PATH_MIN_BYTES", threshold)
        results.append(analyse(read_path(tmp_path / "trace", READERS).timelines))
    assert results[0] == results[1]
    assert results[0].merged.streams == 2 and results[0].merged.concurrent_ns > 0


def test_largest_equals_a_stable_sort_with_ties():
    from profilectl.analysis.intervals import largest
    rng = np.random.default_rng(9)
    for values in (rng.integers(0, 5, size=200), rng.integers(0, 10**6, size=1_000), np.zeros(30, np.int64),
                   np.arange(7)):
        assert np.array_equal(largest(values, 5), np.argsort(-values, kind="stable")[:5])


def test_union_of_ranks_window_by_window_equals_the_whole():
    from profilectl.analysis.intervals import gap_min_ns
    from profilectl.analysis.timeline import _union_of_ranks
    GAP_MIN_NS = gap_min_ns()
    rng = np.random.default_rng(11)
    blocks = []
    for n in (500, 40, 1_300, 0):
        start = np.cumsum(rng.integers(0, 60_000, size=n)) + int(rng.integers(0, 10**6))
        blocks.append(union(start, start + rng.integers(0, 40_000, size=n)))
    s, e = union(np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks]))
    holes = s[1:] - e[:-1]
    expected = (int(e[-1] - s[0]), int((e - s).sum()), int((holes >= GAP_MIN_NS).sum()),
                int(holes[holes >= GAP_MIN_NS].sum()), int(holes.max()))
    for chunk in (1, 5, 64, 10**6):
        joined = _union_of_ranks(blocks, chunk_rows=chunk)
        assert (joined.open[1] - joined.first, joined.length, joined.gaps, joined.gap_total,
                joined.largest_hole) == expected


def _union_length(start, end):
    low, high = union(start, end)
    return int((high - low).sum())


@pytest.mark.parametrize("first_other", [None, 0, 1_234, 2_999])  # None: kernels only, no collective
@pytest.mark.parametrize("chunk_rows", [1, 64, 3_000])
def test_compute_communication_and_copies_are_their_own_unions(first_other, chunk_rows):
    """compute_ns, communication_ns and memory_ns against the union of each kind's intervals, made
    apart: where every activity is a compute kernel the busy union stands for the compute one, and
    from the first collective or copy the compute union goes on alone from where the busy one stood."""
    rng = np.random.default_rng(17)
    n = 3_000
    start = np.cumsum(rng.integers(0, 20_000, size=n)) + 10**12
    end = start + rng.integers(0, 30_000, size=n)
    names = ["gemm", "relu", "ncclAllReduce", "copy"]
    name = rng.integers(0, 2, size=n).astype(np.int32)
    kind = np.zeros(n, dtype=np.int8)
    if first_other is not None:
        later = np.arange(n) >= first_other
        name[later & (rng.random(n) < 0.2)] = 2
        copies = later & (rng.random(n) < 0.1)
        name[copies], kind[copies] = 3, 1
        name[first_other], kind[first_other] = 2, 0  # the first other activity: a collective
    timeline = rank_timeline("0", None, start=start, end=end, stream=np.zeros(n, dtype=np.int32), kind=kind,
                             name=name, correlation=None, names=names, streams=["a"])
    row = analyse_rank(timeline, chunk_rows=chunk_rows)[0]
    compute = (kind == 0) & (name != 2)
    communication = (kind == 0) & (name == 2)
    assert row.compute_ns == _union_length(start[compute], end[compute]) > 0
    assert row.communication_ns == _union_length(start[communication], end[communication])
    assert row.memory_ns == _union_length(start[kind == 1], end[kind == 1])
    assert (row.communication_ns > 0) == (first_other is not None)


@pytest.mark.parametrize("chunk_rows", [1, 3, 1 << 18])
def test_a_hole_of_exactly_the_gap_minimum_is_a_gap(chunk_rows):
    """profiling/verdicts.yaml's gap_min_ns is the shortest gap: a hole of exactly that length is
    counted and listed, one a nanosecond shorter is neither (whatever the chunking)."""
    from profilectl.analysis.intervals import gap_min_ns
    least = gap_min_ns()
    start = np.array([0, 100 + least, 200 + 2 * least - 1], dtype=np.int64)  # holes: least, least - 1
    end = np.array([100, 200 + least, 300 + 2 * least - 1], dtype=np.int64)
    timeline = rank_timeline("0", None, start=start, end=end, stream=np.zeros(3, np.int64), kind=np.zeros(3, np.int8),
                             name=np.array([0, 1, 2], dtype=np.int32), names=["a", "b", "c"], streams=["s"])
    row, gaps, _ = analyse_rank(timeline, chunk_rows=chunk_rows)
    assert (row.gaps, row.gap_total_ns, row.largest_gap_ns) == (1, least, least)
    assert [(g.duration_ns, g.after, g.before) for g in gaps] == [(least, "a", "b")]


def test_chunk_boundaries_inside_runs_of_equal_starts_change_nothing():
    """Small traces dense with equal starts, zero-length activity and overlaps, cut into chunks of
    1, 2 and 3 rows (every run of equal starts split): the figures of the whole at once."""
    for seed in range(300):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 40))
        start = np.sort(rng.integers(0, 30, size=n)).astype(np.int64)
        end = start + rng.integers(0, 12, size=n) * (rng.random(n) > 0.3)
        timeline = rank_timeline("0", None, start=start, end=end, stream=rng.integers(0, 3, size=n),
                                 kind=(rng.random(n) < 0.2).astype(np.int8),
                                 name=rng.integers(0, 3, size=n).astype(np.int32),
                                 names=["gemm", "ncclAllReduce", "relu"], streams=["x", "y", "z"])
        whole = analyse_rank(timeline, chunk_rows=n)
        assert (whole[0].concurrent_ns, whole[0].max_concurrency) == reference_depth(start, end), seed
        for chunk in (1, 2, 3):
            part = analyse_rank(timeline, chunk_rows=chunk)
            assert (part[0], part[1]) == (whole[0], whole[1]), (seed, chunk)
