"""The fast path for large traces: aggregation inside a columnar/SQL engine, never rows in Python.

Chosen by measurement (bench/ingest.py; figures in docs/validation.md): on a 10-million-dispatch
kernel_trace.csv (4.3 GiB, 2 cores) a polars streaming group-by took 3.7 s and ~410 MB, DuckDB's
read_csv 4.5 s and 205 MB, pandas 27.6 s and 7.7 GB. rocpd databases are aggregated by SQLite
itself. Without polars installed, CSV falls back to the csv-module readers (identical
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


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise FormatError(f"{path}: cannot open as SQLite ({exc})") from None


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info(`{table}`)")}


def _interval(db: sqlite3.Connection, table: str, alias: str) -> tuple[str, str]:
    """(FROM clause, duration expression) for a rocpd table with an interval.

    Earlier rocpd schemas store `start`/`end` on the row; later ones store `start_id`/`end_id` into
    a shared rocpd_timestamp table. Both are read."""
    columns = _columns(db, table)
    if {"start", "end"} <= columns:
        return f"`{table}` {alias}", f"({alias}.\"end\" - {alias}.start)"
    if {"start_id", "end_id"} <= columns:
        return (f"`{table}` {alias} JOIN rocpd_timestamp TS ON TS.id = {alias}.start_id "
                f"JOIN rocpd_timestamp TE ON TE.id = {alias}.end_id"), "(TE.value - TS.value)"
    raise FormatError(f"{table} has neither start/end nor start_id/end_id columns")


def _aggregates(duration: str) -> str:
    return (f"count(*), sum({duration}), sum(CAST({duration} AS REAL) * {duration}), "
            f"min({duration}), max({duration})")


def rocpd_kernels(path: Path) -> dict[str, KernelStats]:
    """Kernel statistics of a rocpd database (rocprofv3 >= 7.0 default output), in SQLite."""
    db = _connect(path)
    # Group dispatches by kernel id alone (half the time of grouping through the join), then name
    # them from the small symbol table. A database merged from several sessions holds several
    # guids, whose kernel ids overlap: only then is the guid part of the key.
    try:
        source, duration = _interval(db, "rocpd_kernel_dispatch", "K")
        symbols = {(guid, sid): name for sid, guid, name in
                   db.execute("SELECT id, guid, display_name FROM rocpd_info_kernel_symbol")}
        if len({guid for guid, _ in symbols}) <= 1:
            guid = next(iter(symbols))[0] if symbols else None
            rows = [(guid, kid, *rest) for kid, *rest in
                    db.execute(f"SELECT K.kernel_id, {_aggregates(duration)} FROM {source} GROUP BY K.kernel_id")]
        else:
            rows = db.execute(f"SELECT K.guid, K.kernel_id, {_aggregates(duration)} FROM {source} "
                              "GROUP BY K.guid, K.kernel_id").fetchall()
    except (sqlite3.DatabaseError, FormatError) as exc:
        raise FormatError(f"{path}: not a readable rocpd database ({exc})") from None
    finally:
        db.close()
    stats: dict[str, KernelStats] = {}
    for guid, kernel_id, n, total, total_sq, lo, hi in rows:
        name = symbols.get((guid, kernel_id), f"<unknown kernel {kernel_id}>")
        stats.setdefault(name, KernelStats()).merge(KernelStats.from_sums(n, total, total_sq, lo, hi))
    return stats


def _named_intervals(path: Path, table: str) -> dict[str, KernelStats]:
    """Statistics per name (rocpd_string) of an interval table: API regions, memory copies."""
    db = _connect(path)
    try:
        if not _columns(db, table):
            return {}
        source, duration = _interval(db, table, "R")
        rows = db.execute(f"SELECT S.string, {_aggregates(duration)} FROM {source} "
                          "JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid GROUP BY S.string").fetchall()
    except (sqlite3.DatabaseError, FormatError):
        return {}  # optional tables: a database without them simply has no such section
    finally:
        db.close()
    return {name: KernelStats.from_sums(n, t, sq, lo, hi) for name, n, t, sq, lo, hi in rows}


def rocpd_memory_copies(path: Path) -> dict[str, KernelStats]:
    return _named_intervals(path, "rocpd_memory_copy")


def rocpd_regions(path: Path) -> dict[str, KernelStats]:
    """Host API calls (HIP, HSA, markers) recorded as regions."""
    return _named_intervals(path, "rocpd_region")


def rocpd_counters(path: Path) -> list[dict]:
    """Counter values per (kernel, counter), summed over dispatches: rocpd_pmc_event joined to the
    dispatch that shares its event id, as the rocpd `counters_collection` view does."""
    db = _connect(path)
    try:
        if not _columns(db, "rocpd_pmc_event"):
            return []
        rows = db.execute(
            "SELECT S.display_name, I.name, sum(E.value), count(*) FROM rocpd_pmc_event E "
            "JOIN rocpd_info_pmc I ON I.id = E.pmc_id AND I.guid = E.guid "
            "JOIN rocpd_kernel_dispatch K ON K.event_id = E.event_id AND K.guid = E.guid "
            "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
            "GROUP BY S.display_name, I.name").fetchall()
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()
    return [{"kernel": k, "counter": c, "value": float(v), "dispatches": n} for k, c, v, n in rows]


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
