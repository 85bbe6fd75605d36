"""The kernel table of the polars CSV pass: name_stats over the 32-bit durations the reader keeps (made
on a second thread while the start and end columns are made) equals each name's figures computed
row by row, block by block as over the whole, and the reader's table equals the one from its columns."""

import csv
import math

import numpy as np
import pytest

from profilectl.formats import polars_csv


def _reference(names, name, duration):
    out = {}
    for i, text in enumerate(names):
        mine = duration[name == i].astype(np.int64)
        if len(mine):
            spread = float((mine.astype(np.float64) ** 2).sum()) / len(mine) - mine.mean() ** 2
            out[text] = (len(mine), int(mine.sum()), int(mine.min()), int(mine.max()), math.sqrt(max(spread, 0)))
    return out


def _figures(stats):
    return {k: (s.calls, int(s.total), int(s.minimum), int(s.maximum), s.std) for k, s in stats.items()}


@pytest.mark.parametrize("name_type,count", [(np.int16, 300), (np.int32, 40_000)])
@pytest.mark.parametrize("duration_type", [np.int32, np.int64])
def test_name_stats_equal_the_row_by_row_figures(monkeypatch, name_type, count, duration_type):
    monkeypatch.setattr(polars_csv, "STATS_BLOCK", 5_000)  # several blocks, names split across them
    rng = np.random.default_rng(11)
    rows = 23_456
    name = rng.integers(0, count, rows).astype(name_type)
    # int64: durations past 32 bits; int32: below 2**24, where the float sum of squares (KernelStats'
    # from_sums, as polars' group-by gives it) is exact and the spread can be checked too
    duration = rng.integers(0, 2**24 if duration_type == np.int32 else 2**40, rows).astype(duration_type)
    start = np.cumsum(rng.integers(0, 1000, rows)).astype(np.int64)
    names = [f"k{i}" for i in range(count)]
    expected = _reference(names, name, duration)
    for got in (polars_csv.name_stats(name, names, duration=duration),
                polars_csv.name_stats(name, names, start, start + duration.astype(np.int64))):
        figures = _figures(got)
        assert figures.keys() == expected.keys()
        for key, (calls, total, low, high, std) in expected.items():
            assert figures[key][:4] == (calls, total, low, high)
            if duration_type == np.int32:
                assert figures[key][4] == pytest.approx(std, rel=1e-6, abs=1e-3)


def test_the_readers_table_is_that_of_its_columns(tmp_path, monkeypatch):
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 2_000)
    monkeypatch.setattr(polars_csv, "STATS_BLOCK", 3_000)
    rng = np.random.default_rng(2)
    path = tmp_path / "11_kernel_trace.csv"
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["Kernel_Name", "Start_Timestamp", "End_Timestamp"])
        at = 1_000_000
        for i in range(10_000):
            at += int(rng.integers(0, 5_000))
            # one duration past 32 bits: the duration column widens to int64 from that batch on
            took = 2**33 if i == 7_777 else int(rng.integers(1, 9_000))
            out.writerow([f"kernel {int(rng.integers(0, 40))}", at, at + took])
    cols = polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert cols.known_stats is not None
    again = polars_csv.TraceColumns(start=cols.start, end=cols.end, name=cols.name, names=cols.names)
    assert _figures(cols.stats()) == _figures(again.stats())
    assert sum(s.calls for s in cols.stats().values()) == 10_000
