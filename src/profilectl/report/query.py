"""`profilectl query RUN "SELECT ..."`: SQL over a report's tables, read-only and bounded.

SQLite (the standard library's sqlite3), not polars' SQL context: always there (polars is an
optional extra), the same database `report --format sqlite` writes (a query that works here works
on that file, in DuckDB's sqlite scanner, in any SQLite client), and the dialect rocpd's own
databases speak. The tables are the report's, every row (kernels, api, memory_copies, operators,
counters, ranks, timeline, steps, idle_gaps, power, power_samples, ...; `SELECT name FROM
sqlite_master` lists them), with a view per section (section_<key>).

A query reads and never writes. The database is built in memory from the report, then locked:
- `PRAGMA query_only` (no statement changes the database),
- an authorizer that lets through only what a SELECT does (read columns, call functions, recurse)
  and the PRAGMAs that only read; everything else is refused with its name: `ATTACH DATABASE
  'file'` and `VACUUM INTO 'file'` (which attaches its target, and creates it even under
  query_only) cannot create or write a file anywhere,
- and, where Python has Connection.setlimit (3.11+), no database may be attached at all
  (SQLITE_LIMIT_ATTACHED 0), whatever the authorizer says.
A query is bounded: a time budget (the progress handler checks it every few thousand SQLite
instructions, also inside a runaway recursive CTE that would never return), a memory budget (SQLite's
hard heap limit, on top of what the tables themselves take), and Ctrl-C/SIGTERM, honoured the same
way. Rows are streamed: fetched a batch at a time and handed on, never held whole.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from profilectl import errors, settings
from profilectl.errors import ProfilectlError, UsageError
from profilectl.model.document import Document

TIMEOUT_ENV = "PROFILECTL_QUERY_TIMEOUT_S"
MEMORY_ENV = "PROFILECTL_QUERY_MEMORY_MB"
DEFAULT_TIMEOUT_S = 300.0  # a report's tables answer in well under a second; a runaway query ends here
DEFAULT_MEMORY_MB = 1024  # SQLite's working memory beyond the tables (sorts, group_concat, temp b-trees)
PROGRESS_STEPS = 10_000  # SQLite VM instructions between two checks of the time and Ctrl-C (well under 1 ms)
FETCH_ROWS = 512  # rows fetched at a time: a large result is streamed, never held whole
TABLE_PAGE_OVERHEAD = 1.25  # SQLite's heap for an in-memory database, per byte of its pages (measured: ~1.07)
HEAP_MARGIN_BYTES = 16 << 20  # SQLite's own caches and statement memory, besides the budget

# What a reading statement asks the authorizer for (sqlite3 action codes); every other action is refused.
_READING = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
# PRAGMAs that only read, as statements or table-valued functions (pragma_table_info('kernels')):
# those whose argument names a table or an index, and those that read a setting when given none
# (with one, `PRAGMA user_version = 5`, they would set it)
_SCHEMA_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
                             "foreign_key_list"})
_SETTING_PRAGMAS = frozenset({"database_list", "collation_list", "function_list", "module_list", "pragma_list",
                              "compile_options", "encoding", "page_size", "page_count", "schema_version",
                              "user_version"})
_ACTIONS = ("CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
            "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE",
            "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW",
            "INSERT", "PRAGMA", "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE",
            "CREATE_VTABLE", "DROP_VTABLE", "SAVEPOINT")
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ") for name in _ACTIONS
                 if hasattr(sqlite3, f"SQLITE_{name}")}


class QueryBudgetError(ProfilectlError):
    """The query used up its memory budget (exit 7): one line naming the budget and its setting."""
    exit_code = errors.QUERY_MEMORY


@dataclass(frozen=True)
class Budget:
    """How long a query may run and how much memory SQLite may take for it (None: no bound)."""
    seconds: float | None = DEFAULT_TIMEOUT_S
    memory_mb: float | None = DEFAULT_MEMORY_MB

    @classmethod
    def of(cls, seconds: float | None = None, memory_mb: float | None = None,
           env: Mapping[str, str] | None = None) -> "Budget":
        """The options where given, else $PROFILECTL_QUERY_TIMEOUT_S / $PROFILECTL_QUERY_MEMORY_MB,
        else the defaults; 0 means no bound. A value that is not a number >= 0 is a UsageError."""
        env = os.environ if env is None else env
        return cls(seconds=_bound("--timeout", TIMEOUT_ENV, seconds, env, DEFAULT_TIMEOUT_S),
                   memory_mb=_bound("--memory-mb", MEMORY_ENV, memory_mb, env, DEFAULT_MEMORY_MB))


def _bound(option: str, name: str, given: float | None, env: Mapping[str, str], default: float) -> float | None:
    if given is None:  # the variable: a number, 0 or more (else one line naming it), or the default
        given = settings.get_float(name, env)
        if given is None:
            return default
    if not math.isfinite(given) or given < 0:
        raise UsageError(f"query: {option} {given:g} must be a finite number >= 0 (0: no bound)")
    return None if given == 0 else given


@dataclass
class Result:
    """The columns of a running query and its rows, streamed (iterate once)."""
    columns: list[str]
    rows: Iterator[tuple[Any, ...]]


class _Guard:
    """The state the progress handler reads: the deadline and a stop asked for by a signal."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.deadline = time.monotonic() + budget.seconds if budget.seconds else None
        self.signal: int | None = None
        self.refused: str | None = None  # what the authorizer refused last

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def progress(self) -> int:
        """Non-zero stops SQLite (it raises OperationalError 'interrupted')."""
        return 1 if self.signal is not None or self.expired() else 0

    def authorize(self, action: int, arg1: str | None, arg2: str | None, database: str | None,
                  trigger: str | None) -> int:
        if action in _READING:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and trigger is None and database == "main":
            # SQLite's own question when a table-valued PRAGMA reads the schema (pragma_table_info);
            # a user's UPDATE of sqlite_master is refused by SQLite itself, and query_only stops any write
            return sqlite3.SQLITE_OK
        pragma = (arg1 or "").lower() if action == sqlite3.SQLITE_PRAGMA else None
        if pragma in _SCHEMA_PRAGMAS or (pragma in _SETTING_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"action {action}")
        self.refused = f"{what} {arg1}" if action == sqlite3.SQLITE_PRAGMA and arg1 else what
        return sqlite3.SQLITE_DENY

    def check(self, rows: int) -> None:
        """Between rows (the output's own time): the same budget and signals as inside SQLite."""
        if self.signal is not None:
            raise self.interrupted(rows)
        if self.expired():
            raise self.timed_out(rows)

    def interrupted(self, rows: int) -> ProfilectlError:
        name = signal.Signals(self.signal).name if self.signal else "a signal"
        return ProfilectlError(f"query: interrupted by {name} after {rows} row(s)", exit_code=errors.INTERRUPTED)

    def timed_out(self, rows: int) -> ProfilectlError:
        return ProfilectlError(f"query: stopped after its {self.budget.seconds:g} s budget ({rows} row(s) given); "
                               f"--timeout S or ${TIMEOUT_ENV} sets it (0: no bound)", exit_code=errors.TIMEOUT)

    def out_of_memory(self, rows: int) -> ProfilectlError:
        return QueryBudgetError(f"query: stopped at its memory budget of {self.budget.memory_mb:g} MiB ({rows} "
                                f"row(s) given); --memory-mb MB or ${MEMORY_ENV} sets it (0: no bound)")


def _lock(db: sqlite3.Connection, guard: _Guard) -> None:
    db.execute("PRAGMA query_only = ON")
    setlimit = getattr(db, "setlimit", None)  # Python 3.11+; the authorizer refuses ATTACH on 3.10 too
    if setlimit is not None:
        setlimit(getattr(sqlite3, "SQLITE_LIMIT_ATTACHED"), 0)
    db.set_authorizer(guard.authorize)
    db.set_progress_handler(guard.progress, PROGRESS_STEPS)


def _heap_limit(db: sqlite3.Connection, budget: Budget) -> int | None:
    """Set SQLite's hard heap limit to what the tables take plus the budget; the previous limit."""
    if budget.memory_mb is None:
        return None
    pages = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    previous = int(db.execute("PRAGMA hard_heap_limit").fetchone()[0])
    limit = int(pages * TABLE_PAGE_OVERHEAD) + HEAP_MARGIN_BYTES + int(budget.memory_mb * (1 << 20))
    db.execute(f"PRAGMA hard_heap_limit = {limit}")
    return previous


@contextlib.contextmanager
def _signals_stop(guard: _Guard) -> Iterator[None]:
    """SIGINT/SIGTERM only mark the query as stopped (the progress handler ends it): a Python
    exception raised inside SQLite's callback would be lost, and a runaway query never returns."""
    if threading.current_thread() is not threading.main_thread():
        yield  # the API from a worker thread: no handlers to install
        return

    def stop(signum: int, _frame: object) -> None:
        guard.signal = signum
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def opened(document: Document, sql: str, budget: Budget | None = None) -> Iterator[Result]:
    """One SQL statement over the document's tables, read-only and bounded (see the module): its
    columns and its rows, streamed while the context is open. A bad or writing statement is a
    UsageError naming SQLite's complaint (or what was refused) and the tables there are; the time
    budget exit 124, the memory budget exit 7, Ctrl-C exit 130: each one line."""
    from profilectl.report.renderers.machine import in_memory
    budget = budget or Budget()
    guard = _Guard(budget)
    db = in_memory(document)
    previous_heap = None
    try:
        previous_heap = _heap_limit(db, budget)
        _lock(db, guard)
        with _signals_stop(guard):
            given = 0
            try:
                cursor = db.execute(sql)
            except sqlite3.Error as exc:
                raise _failure(exc, sql, guard, db, given) from None
            except MemoryError:
                raise guard.out_of_memory(given) from None

            def rows() -> Iterator[tuple[Any, ...]]:
                nonlocal given
                while True:
                    try:
                        batch = cursor.fetchmany(FETCH_ROWS)
                    except sqlite3.Error as exc:
                        raise _failure(exc, sql, guard, db, given) from None
                    except MemoryError:
                        raise guard.out_of_memory(given) from None
                    if not batch:
                        return
                    for row in batch:
                        guard.check(given)
                        given += 1
                        yield row
            yield Result([d[0] for d in cursor.description or ()], rows())
    finally:
        db.set_authorizer(None)
        if previous_heap is not None:  # the limit is the process's: the next query or export starts unbounded
            with contextlib.suppress(sqlite3.Error):
                db.execute(f"PRAGMA hard_heap_limit = {previous_heap}")
        db.close()


def _failure(exc: sqlite3.Error, sql: str, guard: _Guard, db: sqlite3.Connection, rows: int) -> ProfilectlError:
    if guard.signal is not None:
        return guard.interrupted(rows)
    if guard.expired():
        return guard.timed_out(rows)
    if guard.refused is not None and "authoriz" in str(exc):  # "not authorized", "authorization denied"
        keyword = (sql.split() or ["the statement"])[0].upper()
        asked = "" if keyword == guard.refused else f" (it asks SQLite to {guard.refused})"
        return UsageError(f"query: {keyword} is refused{asked}: queries only read the report's tables (SELECT, "
                          f"WITH, and PRAGMAs that read the schema); `report --format sqlite -o FILE` writes a "
                          f"database you may change")
    if "too many attached databases" in str(exc):
        return UsageError("query: ATTACH and VACUUM INTO are refused: queries only read the report's tables and "
                          "never write a file; `report --format sqlite -o FILE` writes the database")
    if "out of memory" in str(exc).lower():
        return guard.out_of_memory(rows)
    db.set_authorizer(None)
    db.set_progress_handler(None, 0)
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                                      "ORDER BY type, name")]
    return UsageError(f"query: {exc} (tables and views: {', '.join(names)})")


def run_query(document: Document, sql: str, budget: Budget | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of one statement, every row in memory (the Python API's DataFrame);
    read-only and bounded like `profilectl query`."""
    with opened(document, sql, budget) as result:
        return result.columns, list(result.rows)
