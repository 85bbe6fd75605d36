"""The fast path for large traces: aggregation inside a columnar/SQL engine, never rows in Python.

Chosen by measurement (bench/ingest.py; figures in docs/validation.md): on a 10-million-dispatch
kernel_trace.csv (4.3 GiB) a polars streaming group-by took 3.5 s and 386 MB, DuckDB's read_csv
12.8 s and 235 MB (DuckDB was ahead only at 1 million rows). rocpd databases are aggregated by
SQLite itself. Without polars installed, CSV falls back to the csv-module readers (identical
results, slower on large files).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from profilectl.formats.common import FormatError, KernelStats, csv_header

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
    scan = pl.scan_csv(path, schema_overrides={name_col: pl.Utf8, start_col: pl.Int64, end_col: pl.Int64})
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


def rocpd_kernels(path: Path) -> dict[str, KernelStats]:
    """Kernel statistics of a rocpd database (rocprofv3 >= 7.0 default output), in SQLite."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise FormatError(f"{path}: cannot open as SQLite ({exc})") from None
    # Group dispatches by kernel id alone (half the time of grouping through the join), then name
    # them from the small symbol table. A database merged from several sessions holds several
    # guids, whose kernel ids overlap: only then is the guid part of the key.
    aggregates = ("count(*), sum(end - start), sum(CAST(end - start AS REAL) * (end - start)), "
                  "min(end - start), max(end - start)")
    try:
        symbols = {(guid, sid): name for sid, guid, name in
                   db.execute("SELECT id, guid, display_name FROM rocpd_info_kernel_symbol")}
        if len({guid for guid, _ in symbols}) <= 1:
            guid = next(iter(symbols))[0] if symbols else None
            rows = [(guid, kid, *rest) for kid, *rest in
                    db.execute(f"SELECT kernel_id, {aggregates} FROM rocpd_kernel_dispatch GROUP BY kernel_id")]
        else:
            rows = db.execute(f"SELECT guid, kernel_id, {aggregates} FROM rocpd_kernel_dispatch "
                              "GROUP BY guid, kernel_id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise FormatError(f"{path}: not a rocpd database ({exc})") from None
    finally:
        db.close()
    stats: dict[str, KernelStats] = {}
    for guid, kernel_id, n, total, total_sq, lo, hi in rows:
        name = symbols.get((guid, kernel_id), f"<unknown kernel {kernel_id}>")
        stats.setdefault(name, KernelStats()).merge(KernelStats.from_sums(n, total, total_sq, lo, hi))
    return stats


def rocpd_memory_copies(path: Path) -> dict[str, KernelStats]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT S.string, count(*), sum(M.end - M.start), sum(CAST(M.end - M.start AS REAL) * (M.end - M.start)), "
            "min(M.end - M.start), max(M.end - M.start) FROM rocpd_memory_copy M "
            "JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid GROUP BY S.string").fetchall()
    except sqlite3.DatabaseError:
        return {}
    finally:
        db.close()
    return {name: KernelStats.from_sums(n, t, sq, lo, hi) for name, n, t, sq, lo, hi in rows}


def is_rocpd(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return False
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return False
    return "rocpd_kernel_dispatch" in names
