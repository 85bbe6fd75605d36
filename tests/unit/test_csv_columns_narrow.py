"""The CSV trace columns held narrow while polars reads (int32 start offsets and durations, int8/int16
ids, a column sized from an estimate and grown where it was short) give back exactly the values in
the file, also where a batch's range does not fit in 32 bits."""

import csv
from pathlib import Path

import numpy as np

from profilectl.formats import polars_csv


def _write(path: Path, rows: list[tuple[str, int, int, str, int]]) -> None:
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["Kernel_Name", "Start_Timestamp", "End_Timestamp", "Queue_Id", "Correlation_Id"])
        out.writerows(rows)


def _expected(rows: list[tuple[str, int, int, str, int]]) -> tuple[list[int], list[int], list[str], list[str], list[int]]:
    return ([r[1] for r in rows], [r[2] for r in rows], [r[0] for r in rows], [r[3] for r in rows], [r[4] for r in rows])


def _check(path: Path, rows: list[tuple[str, int, int, str, int]]) -> polars_csv.TraceColumns:
    cols = polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp", ("Queue_Id",),
                                    "Correlation_Id")
    start, end, name, stream, corr = _expected(rows)
    assert cols.start.dtype == np.int64 and cols.end.dtype == np.int64
    assert cols.start.tolist() == start
    assert cols.end.tolist() == end
    assert [cols.names[i] for i in cols.name.tolist()] == name
    assert cols.stream is not None and [cols.streams[i] for i in cols.stream.tolist()] == stream
    assert cols.correlation is not None and cols.correlation.tolist() == corr
    return cols


def test_narrow_columns_give_the_file_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    count = 3 * polars_csv.BATCH_ROWS + 123  # several batches
    base = 1_700_000_000_000_000_000
    starts = base + np.cumsum(rng.integers(0, 5000, count))
    durations = rng.integers(1, 100_000, count)
    # the first rows' long names make the estimate from the first MiB short: the columns must grow
    rows = [(("k" * 400 if i < 2000 else "") + f"kernel_{i % 300}", int(s), int(s + d), str(i % 3), i + 1)
            for i, (s, d) in enumerate(zip(starts.tolist(), durations.tolist()))]
    path = tmp_path / "kernel_trace.csv"
    _write(path, rows)
    cols = _check(path, rows)
    assert cols.name.dtype == np.int16 and cols.stream.dtype == np.int8  # type: ignore[union-attr]
    assert cols.correlation.dtype == np.int32  # type: ignore[union-attr]


def test_wide_values_widen_the_columns(tmp_path: Path) -> None:
    count = 2 * polars_csv.BATCH_ROWS + 5
    base = 1_700_000_000_000_000_000
    rows = []
    for i in range(count):
        start = base + i * 1000
        if i == polars_csv.BATCH_ROWS + 7:  # a batch spanning more than 2**31 ns, a duration beyond it
            start += 5 << 31
        end = start + (3 << 31 if i == count - 1 else 500)
        rows.append((f"k{i % 200}", start, end, "0", (1 << 40) + i if i == count - 2 else i))
    path = tmp_path / "kernel_trace.csv"
    _write(path, rows)
    cols = _check(path, rows)
    assert cols.correlation.dtype == np.int64  # type: ignore[union-attr]
