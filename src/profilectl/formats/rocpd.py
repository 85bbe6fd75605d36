"""rocpd databases (rocprofv3 >= 7.0's default output: SQLite), aggregated inside SQLite.

Both schema generations are read: intervals stored as start/end on each row, or as
start_id/end_id into the shared rocpd_timestamp table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from profilectl.errors import FormatError
from profilectl.formats.reader import Reader, first_bytes
from profilectl.formats.tables import PER_DISPATCH, CounterValue, KernelStats, RankRow, Tables

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


def rocpd_counters(path: Path) -> tuple[CounterValue, ...]:
    """Counter values per (kernel, counter), summed over dispatches: rocpd_pmc_event joined to the
    dispatch that shares its event id, as the rocpd `counters_collection` view does."""
    db = _connect(path)
    try:
        if not _columns(db, "rocpd_pmc_event"):
            return ()
        rows = db.execute(
            "SELECT S.display_name, I.name, sum(E.value), count(*) FROM rocpd_pmc_event E "
            "JOIN rocpd_info_pmc I ON I.id = E.pmc_id AND I.guid = E.guid "
            "JOIN rocpd_kernel_dispatch K ON K.event_id = E.event_id AND K.guid = E.guid "
            "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
            "GROUP BY S.display_name, I.name").fetchall()
    except sqlite3.DatabaseError:
        return ()
    finally:
        db.close()
    return tuple(CounterValue(kernel=k, counter=c, value=float(v), dispatches=n) for k, c, v, n in rows)


def is_rocpd(path: Path) -> bool:
    if first_bytes(path, 16) != b"SQLite format 3\x00":
        return False
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return False
    return "rocpd_kernel_dispatch" in names


class RocpdReader(Reader):
    kind = "rocpd"

    def recognises(self, path: Path) -> bool:
        return path.suffix == ".db" and is_rocpd(path)

    def read_file(self, path: Path) -> Tables:
        kernels = rocpd_kernels(path)
        rank = RankRow(rank=path.stem, kernels=len(kernels), dispatches=sum(s.calls for s in kernels.values()),
                       total_ns=sum(s.total for s in kernels.values()))
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH, api=rocpd_regions(path),
                      memory_copies=rocpd_memory_copies(path), counters=rocpd_counters(path), ranks=(rank,))
