"""rocpd databases (rocprofv3 >= 7.0's default output: SQLite), aggregated inside SQLite.

As rocprofv3 writes them (rocprofiler-sdk share/rocprofiler-sdk-rocpd/*.sql, schema 3.0.0 from
ROCm 7.0 to 3.0.3 in 10.0.0; tests/fixtures/rocpd-schema): every `rocpd_<name>` is a VIEW over the
session's `rocpd_<name>_<uuid>` table, so its rowid reads NULL and rows are cut by `id` (the
table's INTEGER PRIMARY KEY, pushed down as a rowid range); intervals are start/end on each row;
a kernel dispatch or memory copy is linked to the API call that launched it through
rocpd_event.stack_id (the SDK's internal correlation id, which is also the call's region id), never
through rocpd_event.correlation_id (the external id: 0 unless --kernel-rename or a tool set one).

Speed (bench/ingest.py; docs/validation.md): a GROUP BY over 10 M dispatches is one SQLite sort on
one core (about a quarter of it scanning, the rest sorting). The dispatch table is cut into rowid
ranges, one per core, each grouped on its own connection in a thread (sqlite3 releases the GIL while
SQLite runs), and the per-kernel sums are added up: the same counts, totals, minima and maxima.
SQLite's own sorter threads (PRAGMA threads) gain less on two cores and cost memory.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from profilectl.errors import FormatError
from profilectl.formats import ranks, roctx
from profilectl.formats.reader import Reader, each_file, first_bytes
from profilectl.model.tables import PER_DISPATCH, AnnotationRow, CounterValue, KernelStats, Tables, merge_all
from profilectl.model.timeline import sorted_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from profilectl.model.timeline import HostActivity, RankTimeline
    from profilectl.formats.polars_csv import TraceColumns

PARALLEL_MIN_ROWS = 200_000  # below this one query is as fast
BUSY_TIMEOUT_S = 5.0  # a writer's transaction in progress: wait this long for it


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise FormatError(f"{path}: cannot open as SQLite ({exc})") from None


def _unreadable(path: Path, exc: Exception) -> FormatError:
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return FormatError(f"{path}: locked by another process for more than {BUSY_TIMEOUT_S:.0f} s "
                           "(is the profiler still writing it?)")
    return FormatError(f"{path}: not a readable rocpd database ({exc})")


def _state(path: Path) -> tuple[tuple[int, int], ...]:
    """Size and mtime of the database and its journal files: a change means it was written."""
    out = []
    for suffix in ("", "-wal", "-journal"):
        try:
            st = os.stat(f"{path}{suffix}")
        except OSError:
            out.append((-1, -1))
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def _grouped(path: Path, table: str, alias: str, keys: str, join: str = "") -> list[tuple[Any, ...]]:
    """(keys..., count, sum, sum of squares, min, max) of a table's intervals, grouped by `keys`:
    the table cut into ranges of its row key grouped concurrently, one connection each, sums added
    up. `join` adds tables the keys name."""
    db = _connect(path)
    try:
        source, duration = _interval(db, table, alias)
        row_key = _row_key(db, table)
        low, high = db.execute(f"SELECT min({row_key}), max({row_key}) FROM `{table}`").fetchone() if row_key else (0, 0)
    finally:
        db.close()
    if low is None:
        return []
    parts = max(1, min(os.cpu_count() or 1, 8)) if row_key and high - low >= PARALLEL_MIN_ROWS else 1
    step = (high - low) // parts + 1
    where = f"WHERE {alias}.{row_key} BETWEEN ? AND ? " if row_key else "WHERE ? <= ? "
    query = f"SELECT {keys}, {_aggregates(duration)} FROM {source}{join} {where}GROUP BY {keys}"

    def part(first: int) -> list[tuple[Any, ...]]:
        connection = _connect(path)
        try:
            return connection.execute(query, (first, min(high, first + step - 1))).fetchall()
        finally:
            connection.close()

    starts = range(low, high + 1, step)
    if parts == 1:
        chunks = [part(low)]
    else:
        with ThreadPoolExecutor(parts) as pool:
            chunks = list(pool.map(part, starts))
    width = keys.count(",") + 1
    merged: dict[tuple[Any, ...], list[Any]] = {}
    for rows in chunks:
        for row in rows:
            key, (n, total, total_sq, lo, hi) = row[:width], row[width:]
            _add_sums(merged, key, (n, total, total_sq, lo, hi))
    return [(*key, *sums) for key, sums in merged.items()]


def _add_sums(into: dict[Any, list[Any]], key: Any, sums: tuple[Any, ...]) -> None:
    """Adds one group's (count, total, total of squares, min, max) to `into[key]`."""
    n, total, total_sq, lo, hi = sums
    have = into.get(key)
    if have is None:
        into[key] = [n, total, total_sq, lo, hi]
    else:
        have[0] += n
        have[1] += total
        have[2] += total_sq
        have[3] = min(have[3], lo)
        have[4] = max(have[4], hi)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info(`{table}`)")}


def _row_key(db: sqlite3.Connection, table: str) -> str | None:
    """The column that cuts a table into ranges: rowid for a table; for a view (rocprofv3's
    `rocpd_<name>` over `rocpd_<name>_<uuid>`, whose rowid reads NULL) its `id`, the table's INTEGER
    PRIMARY KEY, which SQLite pushes down as a rowid range; None: read it whole."""
    kind = db.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if kind is not None and kind[0] == "table":
        return "rowid"
    return "id" if "id" in _columns(db, table) else None


def _interval(db: sqlite3.Connection, table: str, alias: str) -> tuple[str, str]:
    """(FROM clause, duration expression) for a rocpd table with an interval: start/end on the row,
    in every schema rocprofv3 writes."""
    if {"start", "end"} <= _columns(db, table):
        return f"`{table}` {alias}", f"({alias}.\"end\" - {alias}.start)"
    raise FormatError(f"{table} has no start/end columns")


def _launch_link(db: sqlite3.Connection, table: str, alias: str) -> tuple[str, str]:
    """(JOIN clause, expression) of the id that links a row to its launching API call: its event's
    stack_id (rocprofiler-sdk's internal correlation id; generateRocpd.cpp writes it on the event of
    every API call, dispatch and copy). ("", "-1") where the schema has no events."""
    if "event_id" not in _columns(db, table) or "stack_id" not in _columns(db, "rocpd_event"):
        return "", "-1"
    return (f" LEFT JOIN rocpd_event EV ON EV.id = {alias}.event_id AND EV.guid = {alias}.guid",
            "coalesce(EV.stack_id, -1)")


def _aggregates(duration: str) -> str:
    return (f"count(*), sum({duration}), sum(CAST({duration} AS REAL) * {duration}), "
            f"min({duration}), max({duration})")


def rocpd_kernels(path: Path) -> dict[str, KernelStats]:
    """Kernel statistics of a rocpd database (rocprofv3 >= 7.0 default output), in SQLite."""
    # Group dispatches by kernel id alone (half the time of grouping through the join), then name
    # them from the small symbol table. A database merged from several sessions holds several
    # guids, whose kernel ids overlap: only then is the guid part of the key.
    before = _state(path)
    db = _connect(path)
    try:
        _interval(db, "rocpd_kernel_dispatch", "K")
        symbols = {(guid, sid): name for sid, guid, name in
                   db.execute("SELECT id, guid, display_name FROM rocpd_info_kernel_symbol")}
    except (sqlite3.DatabaseError, FormatError) as exc:
        raise _unreadable(path, exc) from None
    finally:
        db.close()
    try:
        if len({guid for guid, _ in symbols}) <= 1:
            guid = next(iter(symbols))[0] if symbols else None
            rows = [(guid, *row) for row in _grouped(path, "rocpd_kernel_dispatch", "K", "K.kernel_id")]
        else:
            rows = _grouped(path, "rocpd_kernel_dispatch", "K", "K.guid, K.kernel_id")
    except (sqlite3.DatabaseError, FormatError) as exc:
        raise _unreadable(path, exc) from None
    if _state(path) != before:
        raise FormatError(f"{path}: changed while it was read (is the profiler still writing it?): "
                          "read it again when the run has finished")
    stats: dict[str, KernelStats] = {}
    for guid, kernel_id, n, total, total_sq, lo, hi in rows:
        name = symbols.get((guid, kernel_id), f"<unknown kernel {kernel_id}>")
        stats.setdefault(name, KernelStats()).merge(KernelStats.from_sums(n, total, total_sq, lo, hi))
    return stats


def _named_intervals(path: Path, table: str, leave_out: tuple[str, ...] = ()) -> dict[str, KernelStats]:
    """Statistics per name (rocpd_string) of an interval table: API regions, memory copies. Grouped
    by string id (and guid), then named from rocpd_string; equal strings of several guids merge.
    `leave_out`: category prefixes (of the row's event) whose rows are not counted."""
    db = _connect(path)
    try:
        if not _columns(db, table):
            return {}
        names = {(guid, sid): text for sid, guid, text in db.execute("SELECT id, guid, string FROM rocpd_string")}
        join, keys = "", "R.guid, R.name_id"
        if leave_out and "event_id" in _columns(db, table) and "category_id" in _columns(db, "rocpd_event"):
            join, keys = " LEFT JOIN rocpd_event EV ON EV.id = R.event_id AND EV.guid = R.guid", keys + ", EV.category_id"
    except (sqlite3.DatabaseError, FormatError):
        return {}  # optional tables: a database without them simply has no such section
    finally:
        db.close()
    try:
        rows = _grouped(path, table, "R", keys, join)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            raise _unreadable(path, exc) from None
        return {}
    except (sqlite3.DatabaseError, FormatError):
        return {}
    sums: dict[str, list[Any]] = {}
    for guid, name_id, *rest in rows:
        category = rest.pop(0) if join else None
        name = names.get((guid, name_id))
        if name is None:
            continue  # as the join did: a region without its string is left out
        if leave_out and category is not None and names.get((guid, category), "").startswith(leave_out):
            continue
        _add_sums(sums, name, tuple(rest))
    return {name: KernelStats.from_sums(*values) for name, values in sums.items()}


def rocpd_memory_copies(path: Path) -> dict[str, KernelStats]:
    return _named_intervals(path, "rocpd_memory_copy")


def rocpd_regions(path: Path) -> dict[str, KernelStats]:
    """Host API calls (HIP, HSA, RCCL ...) recorded as regions. ROCTx ranges (category
    MARKER_CORE_RANGE_API) are regions too, but they are the user's annotations (formats/roctx.py),
    not API calls: they are left out here, as the CSV reader's API table leaves out marker traces;
    so are rocprof-sys's sampled call-stack frames (sampling_categories), the host's functions."""
    return _named_intervals(path, "rocpd_region", leave_out=("MARKER", *sampling_categories()))


def rocpd_counters(path: Path) -> tuple[CounterValue, ...]:
    """Counter values per (kernel, counter): rocpd_pmc_event joined to the dispatch that shares its
    event id (as the rocpd `counters_collection` view does), with the sums a duration-weighted mean
    needs (the dispatch interval is the weight)."""
    db = _connect(path)
    try:
        if not _columns(db, "rocpd_pmc_event"):
            return ()
        source, duration = _interval(db, "rocpd_kernel_dispatch", "K")
        rows = db.execute(
            f"SELECT S.display_name, I.name, sum(E.value), count(*), sum(E.value * {duration}), sum({duration}), "
            f"count(CASE WHEN {duration} > 0 THEN 1 END), min(E.value), max(E.value) "
            f"FROM {source} JOIN rocpd_pmc_event E ON E.event_id = K.event_id AND E.guid = K.guid "
            "JOIN rocpd_info_pmc I ON I.id = E.pmc_id AND I.guid = E.guid "
            "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
            "GROUP BY S.display_name, I.name").fetchall()
    except (sqlite3.DatabaseError, FormatError):
        return ()
    finally:
        db.close()
    return tuple(CounterValue(kernel=k, counter=c, total=float(total), dispatches=n, weighted=float(weighted or 0),
                              weight=float(weight or 0), timed=timed, minimum=float(low), maximum=float(high))
                 for k, c, total, n, weighted, weight, timed, low, high in rows)


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


FETCH_ROWS = 1 << 16  # rows per fetch of the column scan: Python objects only for a batch at a time
# connectorx + pyarrow, where installed, read the dispatch columns as Arrow (bench/ingest.py: 1 M
# dispatches 2.1 s against 4.9 s through sqlite3 rows); PROFILECTL_NO_ARROW=1 turns it off.


def arrow_route() -> bool:
    """Whether the dispatch columns come through connectorx's Arrow batches (else sqlite3 rows)."""
    import importlib.util
    from profilectl import settings
    return not settings.get_bool("PROFILECTL_NO_ARROW") and importlib.util.find_spec("connectorx") is not None and \
        importlib.util.find_spec("pyarrow") is not None


def int_batches(path: Path, db: sqlite3.Connection, query: str, width: int) -> Iterator[list["NDArray[np.int64]"]]:
    """The integer columns of a query, batch by batch, as numpy arrays. connectorx (Arrow, several
    threads, no Python object per value) where installed, else sqlite3 rows converted a batch at a
    time (the same values); a NULL reads as -1 ("no such id")."""
    import numpy as np
    if arrow_route():
        import connectorx
        stream = connectorx.read_sql(f"sqlite://{path}", query, return_type="arrow_stream", batch_size=1 << 18)
        for batch in stream:
            columns = []
            for i in range(width):
                values = batch.column(i)
                if values.null_count:
                    values = values.fill_null(-1)
                columns.append(np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64))
            yield columns
        del stream
        import pyarrow
        pyarrow.default_memory_pool().release_unused()  # Arrow's allocator keeps freed batches otherwise
        return
    cursor = db.execute(query)
    while True:
        rows = cursor.fetchmany(FETCH_ROWS)
        if not rows:
            break
        try:
            batch = np.array(rows, dtype=np.int64)
        except (TypeError, ValueError):  # a NULL somewhere: -1, as "no such id"
            batch = np.array([[-1 if v is None else v for v in row] for row in rows], dtype=np.int64)
        batch = batch.reshape(-1, width)
        yield [np.ascontiguousarray(batch[:, i]) for i in range(width)]


class _KernelColumns:
    """Every dispatch as numpy columns filled batch by batch into arrays sized once (by the table's
    rowid range, an upper bound: pages never written are never committed), so no column is ever held
    twice; room is left after the dispatches for `extra` rows (the memory copies)."""

    def __init__(self, rows: int, extra: int, linked: bool) -> None:
        import numpy as np
        self.size = 0
        self.start = np.empty(rows + extra, dtype=np.int64)
        self.end = np.empty(rows + extra, dtype=np.int64)
        self.kernel = np.empty(rows + extra, dtype=np.int32)  # kernel ids, then name indices in place
        # correlation ids as int32 while they fit (rocpd numbers them from 1): half the column
        self.correlation = np.empty(rows + extra, dtype=np.int32) if linked else None
        self.stream = np.empty(0, dtype=np.int32)  # first-seen key ids, only once there are two keys
        self.keys: dict[int, int] = {}
        self.wide: list["NDArray[np.int64]"] = []  # kernel ids beyond int32 (never seen in rocpd)

    def add(self, kernel: "NDArray[np.int64]", start: "NDArray[np.int64]", end: "NDArray[np.int64]",
            key: "NDArray[np.int64]", correlation: "NDArray[np.int64] | None") -> None:
        import numpy as np
        at, count = self.size, len(kernel)
        if at + count > len(self.start):  # more rows than the rowid range said: grow (not expected)
            grow = max(at + count, 2 * len(self.start))
            for attr in ("start", "end", "kernel", "correlation"):
                old = getattr(self, attr)
                if old is not None:
                    new = np.empty(grow, dtype=old.dtype)
                    new[:at] = old[:at]
                    setattr(self, attr, new)
        self.start[at:at + count] = start
        self.end[at:at + count] = end
        if count and (int(kernel.min()) < 0 or int(kernel.max()) >= 1 << 31):
            self.wide.append(kernel)
        self.kernel[at:at + count] = kernel
        if self.correlation is not None and correlation is not None:
            if count and self.correlation.dtype != np.int64 and not _fits_int32(correlation):
                self.correlation = self.correlation.astype(np.int64)
            self.correlation[at:at + count] = correlation
        if count:
            self._keys(at, key)
        self.size += count

    def _keys(self, at: int, key: "NDArray[np.int64]") -> None:
        """Stream keys (agent, queue) as first-seen ids; one key for every row so far is no column."""
        import numpy as np
        first = int(key[0])
        if len(self.keys) <= 1 and (not self.keys or first in self.keys) and bool((key == first).all()):
            self.keys.setdefault(first, 0)
            if len(self.stream):
                self.stream[at:at + len(key)] = 0
            return
        if not len(self.stream):
            self.stream = np.zeros(len(self.start), dtype=np.int32)  # every earlier row had key id 0
        distinct, inverse = np.unique(key, return_inverse=True)
        ids = np.array([self.keys.setdefault(k, len(self.keys)) for k in distinct.tolist()], dtype=np.int32)
        self.stream[at:at + len(key)] = ids[inverse.reshape(-1)]


def _fits_int32(values: "NDArray[np.int64]") -> bool:
    return not len(values) or (int(values.min()) >= -(1 << 31) and int(values.max()) < 1 << 31)


def _kernel_columns(path: Path, db: sqlite3.Connection, symbols: dict[tuple[Any, int], str], extra: int = 0
                    ) -> tuple["TraceColumns", bool, _KernelColumns]:
    """Every dispatch as numpy columns: start, end, name index, stream index, launch link (the
    event's stack_id); and whether the schema links dispatches to events. One scan per guid."""
    import numpy as np
    columns = _columns(db, "rocpd_kernel_dispatch")
    source, _ = _interval(db, "rocpd_kernel_dispatch", "K")
    start, end = "K.start", 'K."end"'
    agent = "K.agent_id" if "agent_id" in columns else "0"
    queue = "K.queue_id" if "queue_id" in columns else "0"
    join, correlation = _launch_link(db, "rocpd_kernel_dispatch", "K")
    linked = bool(join)
    source += join
    key = _row_key(db, "rocpd_kernel_dispatch")
    low, high = db.execute(f"SELECT min({key}), max({key}) FROM rocpd_kernel_dispatch").fetchone() if key else (None, None)
    out = _KernelColumns(0 if low is None else high - low + 1, extra, linked)
    guids: list[str | None] = [*sorted({guid for guid, _ in symbols})] or [None]
    names: dict[str, int] = {}
    for guid in guids:
        where = "" if len(guids) == 1 else f" WHERE K.guid = '{str(guid).replace(chr(39), chr(39) * 2)}'"
        # the stream key as one number: agent in the high half, queue in the low half
        key = f"(coalesce({agent}, -1) << 32) | (coalesce({queue}, -1) & 4294967295)"
        first = out.size
        for got in int_batches(path, db, f"SELECT K.kernel_id, {start}, {end}, {key}"
                                          f"{', ' + correlation if linked else ''} FROM {source}{where}",
                                5 if linked else 4):
            out.add(got[0], got[1], got[2], got[3], got[4] if linked else None)
        _name_ids(out, first, guid, symbols, names)
    count = out.size
    distinct = sorted(out.keys)  # streams in key order, as named below
    if len(distinct) <= 1:
        stream: Any = np.broadcast_to(np.int32(0), (count,))
    else:
        rank = np.zeros(len(out.keys), dtype=np.int32)
        for position, k in enumerate(distinct):
            rank[out.keys[k]] = position
        stream = out.stream[:count]
        for at in range(0, count, 1 << 20):
            stream[at:at + (1 << 20)] = rank[stream[at:at + (1 << 20)]]
    from profilectl.formats.polars_csv import TraceColumns
    return TraceColumns(start=out.start[:count], end=out.end[:count], name=out.kernel[:count], names=list(names),
                        stream=stream, streams=[f"queue {int(k) >> 32}:{int(k) & 0xFFFFFFFF}" for k in distinct],
                        correlation=out.correlation[:count] if out.correlation is not None else None), linked, out


def _name_ids(out: _KernelColumns, first: int, guid: Any, symbols: dict[tuple[Any, int], str],
              names: dict[str, int]) -> None:
    """Kernel ids of rows first.. as indices into `names`, in place: a lookup table over the id range
    (ids are small and dense in rocpd), so no sort of the dispatches; names in kernel id order."""
    import numpy as np
    kernel = out.kernel[first:out.size]
    if not len(kernel):
        return
    if out.wide:
        raise FormatError("kernel ids beyond 32 bits in rocpd_kernel_dispatch")
    low, high = int(kernel.min()), int(kernel.max())
    if high - low > 1 << 22:
        distinct = sorted_distinct(kernel)
        lookup_ids = np.array([names.setdefault(symbols.get((guid, k), f"<unknown kernel {k}>"), len(names))
                               for k in distinct.tolist()], dtype=np.int32)
        for at in range(0, len(kernel), 1 << 20):
            part = kernel[at:at + (1 << 20)]
            part[:] = lookup_ids[np.searchsorted(distinct, part)]
        return
    present = np.zeros(high - low + 1, dtype=np.int64)
    for at in range(0, len(kernel), 1 << 20):
        present += np.bincount(kernel[at:at + (1 << 20)] - low, minlength=high - low + 1)
    lookup = np.zeros(high - low + 1, dtype=np.int32)
    for offset in np.flatnonzero(present).tolist():
        k = low + offset
        lookup[offset] = names.setdefault(symbols.get((guid, k), f"<unknown kernel {k}>"), len(names))
    for at in range(0, len(kernel), 1 << 20):
        part = kernel[at:at + (1 << 20)]
        part[:] = lookup[part - low]


def _interval_rows(db: sqlite3.Connection, table: str, alias: str, fields: tuple[str, ...],
                   stream: tuple[str, ...], skip_categories: tuple[tuple[Any, int], ...] = ()) -> list[Any]:
    """(start, end, *fields, stream key, launch link, ROCTx message) of every row of a small interval
    table (copies, regions): the link is the row's event's stack_id, the message its event's
    extdata `$.message` (where rocprofv3 keeps a ROCTx range's text; the region's own name is the
    operation, roctxThreadRangeA). `skip_categories`: (guid, category string id) of events whose rows
    are left out."""
    columns = _columns(db, table)
    if not columns:
        return []  # an optional table this database does not have
    source, _ = _interval(db, table, alias)
    keys = " || ':' || ".join(f"{alias}.{c}" for c in stream if c in columns) or "''"
    join, link = _launch_link(db, table, alias)
    message = "NULL"
    if join and "extdata" in _columns(db, "rocpd_event"):
        message = "CASE WHEN json_valid(EV.extdata) THEN json_extract(EV.extdata, '$.message') END"
    selected = ", ".join(f"{alias}.{f}" for f in fields)
    where, values = "", tuple[Any, ...]()
    if join and skip_categories:
        where = (f" WHERE EV.category_id IS NULL OR (EV.guid, EV.category_id) NOT IN "
                 f"(VALUES {', '.join('(?, ?)' for _ in skip_categories)})")
        values = tuple(v for pair in skip_categories for v in pair)
    return db.execute(f'SELECT {alias}.start, {alias}."end", {selected}, {keys}, {link}, {message} '
                      f"FROM {source}{join}{where}", values).fetchall()


def rocpd_read(path: Path, rank: str, host: str | None) -> tuple[dict[str, KernelStats], "RankTimeline | None"]:
    """The kernel table and the timeline from one scan of the dispatches (numpy columns, never a
    Python object per dispatch), with the copies, launch calls and step regions."""
    import numpy as np
    from profilectl.model.timeline import Marker, rank_timeline
    from profilectl.model.timeline import STEP_NAME
    before = _state(path)
    db = _connect(path)
    try:
        symbols = {(guid, sid): name for sid, guid, name in
                   db.execute("SELECT id, guid, display_name FROM rocpd_info_kernel_symbol")}
        strings = {(guid, sid): text for sid, guid, text in db.execute("SELECT id, guid, string FROM rocpd_string")} \
            if _columns(db, "rocpd_string") else {}
        copies = _interval_rows(db, "rocpd_memory_copy", "M", ("guid", "name_id"), ("stream_id",))
        sampling = tuple(key for key, text in strings.items() if text in sampling_categories())
        regions = _interval_rows(db, "rocpd_region", "R", ("guid", "name_id"), (), skip_categories=sampling)
        samples = _sampled_frames(db, sampling)
        kernels, linked, filled = _kernel_columns(path, db, symbols, extra=len(copies))
    except (sqlite3.DatabaseError, FormatError) as exc:
        raise _unreadable(path, exc) from None
    except Exception as exc:  # connectorx's own errors: a file SQLite itself cannot read either
        if type(exc).__module__.split(".")[0] not in ("connectorx", "pyarrow"):
            raise
        raise _unreadable(path, exc) from None
    finally:
        db.close()
    if _state(path) != before:
        raise FormatError(f"{path}: changed while it was read (is the profiler still writing it?): "
                          "read it again when the run has finished")
    stats = kernels.stats()
    if not stats:
        return stats, None
    names = list(kernels.names)
    name_index = {n: i for i, n in enumerate(names)}
    streams = list(kernels.streams)
    stream_index = {n: i for i, n in enumerate(streams)}
    copy_name = [name_index.setdefault(strings.get((g, n), "memory copy"), len(name_index)) for _, _, g, n, *_ in copies]
    copy_stream = [stream_index.setdefault(f"copy {key}", len(stream_index)) for _, _, _, _, key, *_ in copies]
    names, streams = list(name_index), list(stream_index)
    api = [(a, b, c) for a, b, _, _, _, c, _ in regions if c >= 0]
    markers = [Marker(text, a, b, False) for a, b, g, n, _, _, message in regions
               if b > a and STEP_NAME.match(text := message or strings.get((g, n), ""))]
    count, total = len(kernels.start), len(kernels.start) + len(copies)
    # the copies go into the room left after the dispatches: no column is copied to append them
    filled.start[count:total] = [c[0] for c in copies]
    filled.end[count:total] = [c[1] for c in copies]
    filled.kernel[count:total] = copy_name
    copy_linked = any(c[5] >= 0 for c in copies)
    correlation = None
    if linked and filled.correlation is not None:
        copy_ids = np.array([c[5] for c in copies], dtype=np.int64)
        if filled.correlation.dtype != np.int64 and not _fits_int32(copy_ids):
            filled.correlation = filled.correlation.astype(np.int64)
        filled.correlation[count:total] = copy_ids
        correlation = filled.correlation[:total]
    elif copy_linked:
        correlation = np.full(total, -1, dtype=np.int64)
        correlation[count:] = [c[5] for c in copies]
    stream: Any = kernels.stream
    if copies:
        if len(filled.stream) >= total:  # the dispatches' stream column has room left for the copies
            stream = filled.stream[:total]
        else:
            stream = np.empty(total, dtype=np.int32)
            stream[:count] = kernels.stream if kernels.stream is not None else 0
        stream[count:] = copy_stream
    kind: Any = np.broadcast_to(np.int8(0), (total,))
    if copies:
        kind = np.zeros(total, dtype=np.int8)
        kind[count:] = 1
    timeline = rank_timeline(
        rank, host, start=filled.start[:total], end=filled.end[:total], stream=stream, kind=kind,
        name=filled.kernel[:total], correlation=correlation,
        names=names, streams=streams, api_start=[a[0] for a in api], api_end=[a[1] for a in api],
        api_correlation=[a[2] for a in api], markers=markers,
        host_activity=_host_activity(samples, regions, strings) if samples else None,
        program="native" if samples else "")
    return stats, timeline


@functools.lru_cache(maxsize=1)
def _rocprof_sys() -> dict[str, Any]:
    from profilectl import data
    return data.load_mapping("tools/rocprof-sys.yaml")


def sampling_categories() -> tuple[str, ...]:
    """The event categories of rocprof-sys's sampled call-stack frames (profiling/tools/rocprof-sys.yaml)."""
    return tuple(_rocprof_sys()["sampling_categories"])


def _sampled_frames(db: sqlite3.Connection, sampling: tuple[tuple[Any, int], ...]) -> list[tuple[Any, ...]]:
    """(tid, start, end, function, file) of every sampled frame, in the order rocprof-sys wrote them
    (per sample interval: outermost frame first), its per-thread span region left out."""
    if not sampling or "call_stack" not in _columns(db, "rocpd_event"):
        return []
    span = _rocprof_sys()["sampling_span_region"]
    marks = ", ".join("(?, ?)" for _ in sampling)
    rows = db.execute(
        f'SELECT R.tid, R.start, R."end", S.string, CASE WHEN json_valid(EV.call_stack) '
        f"THEN json_extract(EV.call_stack, '$.file') END FROM rocpd_region R "
        f"JOIN rocpd_event EV ON EV.id = R.event_id AND EV.guid = R.guid "
        f"JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid "
        f"WHERE (EV.guid, EV.category_id) IN (VALUES {marks}) ORDER BY R.id",
        tuple(v for pair in sampling for v in pair)).fetchall()
    return [row for row in rows if row[3] != span]


def _host_activity(samples: list[tuple[Any, ...]], regions: list[Any], strings: dict[tuple[Any, int], str]
                   ) -> "HostActivity":
    """What the host did: each sample interval named by its innermost frame outside the system's and
    ROCm's libraries (the program's function that held the thread; the innermost frame where every
    frame is in them), as CPU work (HOST_OPERATOR: the idle diagnosis's `host` rule names it), and
    the traced API calls (HIP ...) as runtime calls, so synchronisation and copies are seen too."""
    import numpy as np
    from profilectl.model.timeline import HOST_OPERATOR, HOST_RUNTIME, HostActivity
    system = tuple(_rocprof_sys()["system_library_prefixes"])
    chosen: dict[tuple[Any, int, int], tuple[str, bool]] = {}
    for tid, start, end, function, where in samples:
        key, library = (tid, start, end), str(where or "").startswith(system)
        if key not in chosen or not library or chosen[key][1]:
            chosen[key] = function, library  # later frames are deeper: the last outside the libraries wins
    events = [(tid, start, end, HOST_OPERATOR, function) for (tid, start, end), (function, _) in chosen.items()]
    events += [(None, a, b, HOST_RUNTIME, strings.get((g, n), "")) for a, b, g, n, *_ in regions if b > a]
    names: dict[str, int] = {}
    threads: dict[Any, int] = {}
    return HostActivity(
        start=np.array([e[1] for e in events], dtype=np.int64), end=np.array([e[2] for e in events], dtype=np.int64),
        category=np.array([e[3] for e in events], dtype=np.int8),
        name=np.array([names.setdefault(e[4], len(names)) for e in events], dtype=np.int64),
        thread=np.array([threads.setdefault(e[0], len(threads)) for e in events], dtype=np.int64),
        names=tuple(names), threads=tuple("API calls" if t is None else f"thread {t}" for t in threads))


class RocpdReader(Reader):
    kind = "rocpd"

    def recognises(self, path: Path) -> bool:
        return path.suffix == ".db" and is_rocpd(path)

    reduces_ranks = True

    def read(self, files: list[Path]) -> Tables:
        # one database per rank, read side by side where the Arrow route reads outside the GIL: two
        # threads of sqlite3 rows (8 x 1 M dispatches) took 61.5 s against 26.5 s one after the other
        return merge_all(each_file(self.read_file, files, concurrent=arrow_route()))

    def read_reducing(self, files: list[Path]) -> Tables:
        """Each database's timeline reduced as soon as it is read, where each is a rank of its own
        (two of one rank would be combined first)."""
        if len({ranks.identity(f) for f in files}) < max(len(files), 2):
            return self.read(files)
        return merge_all(each_file(self._read_reduced, files, concurrent=arrow_route()))

    def _read_reduced(self, path: Path) -> Tables:
        from profilectl.model.timeline import sink
        tables = self.read_file(path)
        analyses = sink()
        if not tables.timelines or analyses is None:  # no analysis loaded: the timelines as they are
            return tables
        return dataclasses.replace(tables, timelines=(), reductions=analyses.reduce(tables.timelines))

    def read_file(self, path: Path) -> Tables:
        rank_id, host = ranks.identity(path)
        kernels, timeline = rocpd_read(path, rank_id, host)
        rank = ranks.rank_row(rank_id, host, kernels)
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0, api=rocpd_regions(path),
                      memory_copies=rocpd_memory_copies(path), counters=rocpd_counters(path), ranks=(rank,),
                      timelines=(timeline,) if timeline is not None else (),
                      notes=() if kernels else (f"{path.name} holds zero kernel dispatches",),
                      annotations=_roctx_annotations(path, rank_id))


# ROCTx ranges as rocprofv3 writes them (rocprofiler-sdk generateRocpd.cpp; tests/rocpd_writer.py): a ROCTx range
# is a rocpd_region whose event's category is MARKER_CORE_RANGE_API, named after the operation
# (roctxThreadRangeA for push/pop, roctxProcessRangeA for start/stop), its text in the event's
# extdata `$.message`; rocpd_region.tid is the OS thread. A HIP API call is a region of a HIP
# category; its kernels and copies carry its internal correlation id as their event's stack_id,
# which is also the call's own event's stack_id. (rocpd_event.correlation_id is the external id:
# 0 for every row unless --kernel-rename or a tool set one, so it links nothing.)
def _roctx_annotations(path: Path, rank: str) -> tuple[AnnotationRow, ...]:
    """One rank's ROCTx ranges from a rocpd database; () where it holds none."""
    db = _connect(path)
    try:
        columns, events = _columns(db, "rocpd_region"), _columns(db, "rocpd_event")
        if not {"event_id", "tid"} <= columns or not {"category_id", "stack_id", "extdata"} <= events:
            return ()
        rows = db.execute(
            "SELECT R.start, R.\"end\", R.tid, CAT.string, NAME.string, "
            "CASE WHEN json_valid(EV.extdata) THEN json_extract(EV.extdata, '$.message') END, "
            "coalesce(EV.stack_id, -1) FROM rocpd_region R "
            "JOIN rocpd_event EV ON EV.id = R.event_id AND EV.guid = R.guid "
            "JOIN rocpd_string CAT ON CAT.id = EV.category_id AND CAT.guid = EV.guid "
            "LEFT JOIN rocpd_string NAME ON NAME.id = R.name_id AND NAME.guid = R.guid "
            "WHERE CAT.string LIKE 'MARKER%' OR CAT.string LIKE 'HIP%'").fetchall()
        ranges = [roctx.Range(str(message or name), roctx.PROCESS_THREAD if name == roctx.PROCESS_RANGE else int(tid),
                              int(a), int(b))
                  for a, b, tid, category, name, message, _ in rows if category.startswith("MARKER") and b > a]
        if not ranges:
            return ()
        api = [(int(tid), int(a), int(link)) for a, _b, tid, category, _, _, link in rows
               if category.startswith("HIP") and link >= 0]
        gpu_ns: dict[int, int] = {}
        for table, alias in (("rocpd_kernel_dispatch", "K"), ("rocpd_memory_copy", "M")):
            if "event_id" not in _columns(db, table):
                continue
            activity, duration = _interval(db, table, alias)
            for link, d in db.execute(f"SELECT EV.stack_id, {duration} FROM {activity} JOIN rocpd_event EV "
                                      f"ON EV.id = {alias}.event_id AND EV.guid = {alias}.guid "
                                      "WHERE EV.stack_id IS NOT NULL"):
                gpu_ns[int(link)] = gpu_ns.get(int(link), 0) + int(d)
    except sqlite3.DatabaseError:
        return ()  # the tables stand without the annotations; rocpd's own reader reports a broken file
    finally:
        db.close()
    launches = roctx.Launches([t for t, _, _ in api], [a for _, a, _ in api], [c for _, _, c in api], gpu_ns) if api else None
    return roctx.annotation_rows(rank, ranges, launches)
