"""The fast path for large CSV traces: a polars streaming group-by, never rows in Python.

Chosen by measurement (bench/ingest.py; figures in docs/validation.md): on a 10-million-dispatch
kernel_trace.csv (4.3 GiB, 2 cores) a polars streaming group-by took 3.7 s and ~410 MB, DuckDB's
read_csv 4.5 s and 205 MB, pandas 27.6 s and 7.7 GB. Without polars installed, CSV falls back to
the csv-module readers (identical results, slower on large files).
"""

from __future__ import annotations

from pathlib import Path

from profilectl.errors import FormatError
from profilectl.formats.common import csv_header
from profilectl.formats.tables import KernelStats

FAST_PATH_MIN_BYTES = 8 * 2**20  # below this the csv module is as fast and starts quicker


def fast_engine_available() -> bool:
    try:
        import polars  # noqa: F401
    except ImportError:
        return False
    return True


def grouped_durations_csv(path: Path, name_col: str, start_col: str, end_col: str) -> dict[str, KernelStats]:
    """Per-name duration statistics of one CSV file: a polars streaming group-by (bounded memory)."""
    import polars as pl

    columns = csv_header(path)
    missing = [c for c in (name_col, start_col, end_col) if c not in columns]
    if missing:
        raise FormatError(f"{path}: not the expected file: missing column(s) {', '.join(missing)} "
                          f"(header has {len(columns)} columns)")
    duration = pl.col(end_col) - pl.col(start_col)
    # No schema inference: every column stays text except the two timestamps we add up, so odd
    # values in columns we never read (a new ROCm release, a vendor extension) cannot fail the parse.
    scan = pl.scan_csv(path, infer_schema=False, low_memory=False,
                       schema_overrides={start_col: pl.Int64, end_col: pl.Int64})
    try:
        frame = (scan.select(name_col, start_col, end_col)
                 .group_by(name_col)
                 .agg(pl.len().alias("n"), duration.null_count().alias("missing"), duration.sum().alias("total"),
                      (duration.cast(pl.Float64) ** 2).sum().alias("total_sq"),
                      duration.min().alias("lo"), duration.max().alias("hi"))
                 .collect(engine="streaming"))
        if frame["missing"].sum():
            # A row with missing fields: a run killed mid-write. Find its line only now (rare).
            index = (scan.with_row_index("row").filter(duration.is_null() | pl.col(name_col).is_null())
                     .select("row").head(1).collect()["row"][0])
            raise FormatError(f"{path}:{index + 2}: truncated or malformed row")
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(f"{path}: truncated or malformed CSV ({first[:200]})") from None
    return {name: KernelStats.from_sums(int(n), float(total), float(sq), float(lo), float(hi))
            for name, n, _missing, total, sq, lo, hi in frame.iter_rows()}
