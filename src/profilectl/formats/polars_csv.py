"""The fast path for large CSV traces: a polars streaming group-by, never rows in Python.

Chosen by measurement (bench/ingest.py; figures in docs/validation.md): on a 10-million-dispatch
kernel_trace.csv (4.3 GiB, 2 cores) a polars streaming group-by took 3.7 s and ~410 MB, DuckDB's
read_csv 4.5 s and 205 MB, pandas 27.6 s and 7.7 GB. Without polars installed, CSV falls back to
the csv-module readers (identical results, slower on large files).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from profilectl.errors import FormatError, UsageError
from profilectl.formats.common import csv_header, number, read_csv
from profilectl.model.tables import KernelStats

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from numpy.typing import NDArray

    from profilectl.model.timeline import TimelineFeed

FAST_PATH_MIN_BYTES = 8 * 2**20  # below this the csv module is as fast and starts quicker


# polars' allocator (jemalloc) hands freed pages back after 500 ms instead of its 10 s: the CSV
# reader's buffers are gone soon after the columns are read. At 100 ms the reader's 4 MB read
# buffers were handed back and faulted in again all through the parse (2026-11-28, 2 cores, one
# process each, 2-3 rounds): 10 M rows 422-495 k page faults, 2.0-2.8 s of system CPU, 430 MiB, against
# 242-272 k, 1.7 s and 457-472 MiB at 500 ms (1 s: 205-215 k, 468-504 MiB, too near 512); 8 x 1 M
# ranks 6.3-6.8 s against 5.1-5.6 s at the same 272-290 MiB. Earlier: 10 s decay 533 MiB at 10 M;
# 0 (at once) cost 14 s of system CPU.
JEMALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:0"


def _polars() -> Any:
    """polars, its allocator configured once, at polars' first import (JEMALLOC_CONF). Set only for
    that import, so no workload profilectl starts inherits it; a value the user set is kept."""
    import sys
    if "polars" not in sys.modules and "_RJEM_MALLOC_CONF" not in os.environ:
        os.environ["_RJEM_MALLOC_CONF"] = JEMALLOC_CONF
        try:
            import polars
        finally:
            del os.environ["_RJEM_MALLOC_CONF"]
    import polars
    return polars


# polars' CSV source reads the file in chunks of this many bytes (its own default reads ahead about
# 300 MB whatever the file's size). 10 M rows (batch query alone, 2 cores): default 2.10 s / 362 MB,
# 8 MB 2.16 s / 225 MB, 4 MB 2.09 s / 180 MB, 1 MB 2.20 s / 113 MB; 1 M rows: 0.26 s / 361 MB
# against 0.23 s / 157 MB at 4 MB.
CSV_CHUNK_BYTES = "4000000"


_SETTINGS_LEFT = False  # a query that did not finish left CSV_CHUNK_BYTES set (ours, not the user's)


@contextlib.contextmanager
def _reader_settings(finishes: bool = True) -> Iterator[None]:
    """CSV_CHUNK_BYTES while one query runs: polars reads it from the environment when the query
    starts. Taken back once the query has finished, so no workload started later inherits it. A
    query whose batches are read one by one (`finishes` False) may still be running when an error
    leaves the block, and a getenv in polars' threads beside an unsetenv here can crash: then it is
    left set, marked as ours, and taken back after the next query (or dropped by
    `child_environment`). A value the user set is kept."""
    global _SETTINGS_LEFT
    if "POLARS_CSV_CHUNK_SIZE" in os.environ and not _SETTINGS_LEFT:
        value = os.environ["POLARS_CSV_CHUNK_SIZE"]
        if not (value.isascii() and value.isdigit() and int(value)):  # polars' reader thread panics on it
            raise UsageError(f"POLARS_CSV_CHUNK_SIZE={value!r}: polars reads it as the CSV chunk size in bytes; "
                             "give a positive whole number or unset it")
        yield
        return
    os.environ["POLARS_CSV_CHUNK_SIZE"] = CSV_CHUNK_BYTES
    _SETTINGS_LEFT = True
    try:
        yield
    except BaseException:
        if not finishes:
            raise
        del os.environ["POLARS_CSV_CHUNK_SIZE"]
        _SETTINGS_LEFT = False
        raise
    del os.environ["POLARS_CSV_CHUNK_SIZE"]
    _SETTINGS_LEFT = False


def child_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` without the reader's setting where a query that did not finish left it set."""
    if _SETTINGS_LEFT:
        env.pop("POLARS_CSV_CHUNK_SIZE", None)
    return env


def malformed(path: Path, exc: BaseException) -> FormatError:
    """polars' (or the system's) refusal of a CSV file as one line: the first line of its message."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return FormatError(f"{path}: truncated or malformed CSV ({first[:200]})")


def fast_engine_available() -> bool:
    try:
        _polars()
    except ImportError:
        return False
    return True


def grouped_durations_csv(path: Path, name_col: str, start_col: str, end_col: str) -> dict[str, KernelStats]:
    """Per-name duration statistics of one CSV file: a polars streaming group-by (bounded memory)."""
    pl = _polars()

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
        with _reader_settings():
            frame = (scan.select(name_col, start_col, end_col)
                     .group_by(name_col)
                     .agg(pl.len().alias("n"), duration.null_count().alias("missing"),
                          duration.sum().alias("total"), (duration.cast(pl.Float64) ** 2).sum().alias("total_sq"),
                          duration.min().alias("lo"), duration.max().alias("hi"))
                     .collect(engine="streaming"))
        if frame["missing"].sum():
            # A row with missing fields: a run killed mid-write. Find its line only now (rare).
            index = (scan.with_row_index("row").filter(duration.is_null() | pl.col(name_col).is_null())
                     .select("row").head(1).collect()["row"][0])
            raise FormatError(f"{path}:{index + 2}: truncated or malformed row")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise malformed(path, exc) from None
    return {name: KernelStats.from_sums(int(n), float(total), float(sq), float(lo), float(hi))
            for name, n, _missing, total, sq, lo, hi in frame.iter_rows()}


# Rows per batch of the one-pass read: big enough that polars' per-batch cost vanishes, small enough
# that a batch's text columns stay a few tens of MB whatever the file's size.
BATCH_ROWS = 1 << 16
HASH_SEED = 0x70726F66
STATS_BLOCK = 1 << 20


@dataclass
class TraceColumns:
    """One trace file's intervals as numpy columns (never a Python object per row): names and
    stream keys as indices into small tables, timestamps in integer ns. `stream` and `correlation`
    are None where the caller did not ask for them (or the file lacks them: correlation)."""
    start: "NDArray[np.int64]"
    end: "NDArray[np.int64]"
    name: "NDArray[np.signedinteger[Any]]"  # int16 where there are fewer than 32 Ki names
    names: list[str]
    stream: "NDArray[np.signedinteger[Any]] | None" = None
    streams: list[str] = field(default_factory=list)
    correlation: "NDArray[np.signedinteger[Any]] | None" = None  # int32 where every id fits

    known_stats: dict[str, KernelStats] | None = None  # stats() made by the reader beside the columns

    def stats(self) -> dict[str, KernelStats]:
        """Per-name duration statistics, exact integer sums (as the streaming group-by gives)."""
        if self.known_stats is not None:
            return self.known_stats
        return name_stats(self.name, self.names, self.start, self.end)


def name_stats(name: "NDArray[Any]", names: list[str], start: "NDArray[np.int64] | None" = None,
               end: "NDArray[np.int64] | None" = None, duration: "NDArray[Any] | None" = None
               ) -> dict[str, KernelStats]:
    """Per-name duration statistics (of `duration`, else end - start), exact integer sums, in blocks
    so that the temporaries stay a few MB whatever the trace's length."""
    import numpy as np
    count = len(names)
    rows = len(name)
    if not rows:
        return {}
    calls = np.zeros(count, dtype=np.int64)
    total = np.zeros(count, dtype=np.int64)
    square = np.zeros(count, dtype=np.float64)
    low = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
    for at in range(0, rows, STATS_BLOCK):
        block = name[at:at + STATS_BLOCK]
        # each name's durations side by side (a stable sort of ids of 16 bits or less is a radix
        # sort: wider ids are narrowed first), then one reduction per name: np.minimum.at per
        # row cost 4x as much
        order = np.argsort(block if block.dtype.itemsize <= 2 or count > 1 << 15 else block.astype(np.int16),
                           kind="stable")
        if duration is not None:  # one gather (of 32-bit durations, most often) instead of two of int64
            took = duration[at:at + STATS_BLOCK][order].astype(np.int64, copy=False)
        else:
            assert start is not None and end is not None
            took = end[at:at + STATS_BLOCK][order] - start[at:at + STATS_BLOCK][order]
        block_calls = np.bincount(block, minlength=count)
        present = np.flatnonzero(block_calls)
        first = (np.cumsum(block_calls) - block_calls)[present]
        calls += block_calls
        total[present] += np.add.reduceat(took, first)
        square[present] += np.add.reduceat(took.astype(np.float64) ** 2, first)
        low[present] = np.minimum(low[present], np.minimum.reduceat(took, first))
        high[present] = np.maximum(high[present], np.maximum.reduceat(took, first))
    return {text: KernelStats.from_sums(int(calls[i]), float(total[i]), float(square[i]), float(low[i]),
                                        float(high[i]))
            for i, text in enumerate(names) if calls[i]}


class _FirstSeen:
    """A categorical column's codes (polars' own dictionary, filled inside its engine in parallel with
    the parsing: no text column reaches Python) as ids in order of first appearance, the order the
    csv module's reader gives; the texts are fetched once, at the end."""

    def __init__(self, categories: Any) -> None:
        import numpy as np
        self.categories = categories
        self.lookup = np.full(0, -1, dtype=np.int32)  # code -> id
        self.codes: list[int] = []  # id -> code
        self._texts: list[str] = []

    def ids(self, physical: "NDArray[Any]") -> "NDArray[np.int32]":
        import numpy as np
        if not len(physical):
            return np.zeros(0, dtype=np.int32)
        top = int(physical.max()) + 1
        if top > len(self.lookup):
            self.lookup = np.concatenate([self.lookup, np.full(top - len(self.lookup), -1, dtype=np.int32)])
        ids = self.lookup[physical]
        missed = np.flatnonzero(ids < 0)
        if len(missed):
            distinct, first = np.unique(physical[missed], return_index=True)
            for code in distinct[np.argsort(first)].tolist():
                self.lookup[code] = len(self.codes)
                self.codes.append(code)
            ids = self.lookup[physical]
        return ids

    @property
    def values(self) -> list[str]:
        texts = self.categories.to_series().to_list()
        return ["" if texts[code] is None else texts[code] for code in self.codes]

    def texts_so_far(self) -> list[str]:
        """The texts of every id so far, fetched only when new ids came (a StartOrderFeed's names)."""
        if len(self._texts) < len(self.codes):
            self._texts = self.values
        return self._texts


class _HashedKeys:
    """Text values as small ids in order of first appearance, from polars' 64-bit hash of each row's
    value (hashed inside its engine): a row's hash finds its id in a direct-mapped table (its low
    bits are the slot, O(1) per row in numpy, no sort), and only the rows whose slot holds another
    hash (a new value, or two values sharing a slot) take the slow path, where a value never seen
    before passes through Python once and its first row is noted. Stream keys: their texts are read
    at the end (`texts`) by a second pass over the key's own columns that stops after the last such
    row (a few rows where every queue is used from the start, as training and serving runs use them)."""

    SLOT_BITS = 12

    def __init__(self) -> None:
        import numpy as np
        self.by_hash: dict[int, int] = {}
        self.hashes: list[int] = []  # id -> hash
        self.first_rows: list[int] = []  # id -> its first row (0: the first after the header)
        self.slot_hash = np.zeros(1 << self.SLOT_BITS, dtype=np.uint64)
        self.slot_id = np.full(1 << self.SLOT_BITS, -1, dtype=np.int32)

    def ids(self, hashes: "NDArray[np.uint64]", offset: int) -> "NDArray[np.int32]":
        """The batch's ids; `offset`: the batch's first row in the file."""
        import numpy as np
        if len(hashes) and int(hashes[0]) in self.by_hash and bool((hashes == hashes[0]).all()):
            return np.full(len(hashes), self.by_hash[int(hashes[0])], dtype=np.int32)  # one key (most batches)
        mask = np.uint64((1 << self.SLOT_BITS) - 1)
        slots = (hashes & mask).astype(np.intp)
        codes = self.slot_id[slots]
        missed = np.flatnonzero((self.slot_hash[slots] != hashes) | (codes < 0))
        if len(missed):
            distinct, first, inverse = np.unique(hashes[missed], return_index=True, return_inverse=True)
            ids = np.empty(len(distinct), dtype=np.int32)
            for i in np.argsort(first, kind="stable").tolist():  # new keys numbered in order of their first row
                value = int(distinct[i])
                known = self.by_hash.get(value)
                if known is None:
                    known = self.by_hash[value] = len(self.hashes)
                    self.hashes.append(value)
                    self.first_rows.append(offset + int(missed[first[i]]))
                    slot = value & int(mask)
                    if self.slot_id[slot] < 0:  # first come keeps the slot; later ones take the slow path
                        self.slot_id[slot], self.slot_hash[slot] = known, value
                ids[i] = known
            codes[missed] = ids[inverse.reshape(-1)]
        return codes

    def texts(self, path: Path, scan: "pl.LazyFrame", key: "pl.Expr", hashed: "pl.Expr") -> list[str]:
        """Each id's text (`key`), read from its first row; the row's hash (`hashed`, as the parse
        made it) is checked against the one the parse gave (a file rewritten in between is an error,
        not a wrong name)."""
        if not self.first_rows:
            return []
        pl = _polars()
        try:
            with _reader_settings():
                found = (scan.head(max(self.first_rows) + 1).with_row_index("row")
                         .filter(pl.col("row").is_in(self.first_rows))
                         .select("row", key.alias("key"), hashed.alias("hash"))
                         .collect(engine="streaming"))
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise malformed(path, exc) from None
        by_row = {int(r): (text, int(h)) for r, text, h in found.iter_rows()}
        out = []
        for row, value in zip(self.first_rows, self.hashes):
            text, found_hash = by_row.get(row, (None, -1))
            if text is None or found_hash != value:
                raise FormatError(f"{path}: the file changed while it was read (row {row + 2} is not what the "
                                  "first pass read there)")
            out.append(text)
        return out


class _Dictionary(_HashedKeys):
    """_HashedKeys whose texts come from the batch's own text column as each value first appears:
    the kernel names and stream keys where polars has no per-query categories (< 1.32)."""

    SLOT_BITS = 18  # kernel names: thousands of distinct values

    def __init__(self) -> None:
        super().__init__()
        self.values: list[str] = []

    def texts_so_far(self) -> list[str]:
        return self.values

    def codes(self, hashes: "NDArray[np.uint64]", text: "pl.Series", offset: int) -> "NDArray[np.int32]":
        """The batch's ids; `text`: the batch's values; `offset`: its first row in the file."""
        known = len(self.values)
        codes = self.ids(hashes, offset)
        if len(self.hashes) > known:
            rows = [row - offset for row in self.first_rows[known:]]
            self.values += ["" if value is None else value for value in text.gather(rows).to_list()]
        return codes


def key_hash(columns: tuple[str, ...]) -> "pl.Expr":
    """A stream key's 64-bit hash: each column's own hash (a seed per column, so the keys (a, b) and
    (b, a) differ), combined by xor inside polars' engine. A stream is its columns' values, as the
    csv module's reading keys it (rocprofv3._intervals); its text joins them with ":" (two keys whose
    values hold a ":" may read alike, and stay two streams). Hashing the joined text instead cost
    0.35 s more CPU at 10 M rows (concat_str makes a string per row). An empty cell hashes as ""."""
    import functools
    import operator
    pl = _polars()
    hashes = [pl.col(column).fill_null("").hash(seed) for seed, column in enumerate(columns, start=HASH_SEED)]
    return functools.reduce(operator.xor, hashes) if hashes else pl.lit(0, dtype=pl.UInt64)


def per_query_categories(pl: Any) -> bool:
    """polars >= 1.32: categories of one query's own (names as codes inside its engine); older
    releases hash the texts instead (_Dictionary)."""
    return hasattr(pl, "Categories")


def _index_type(count: int) -> Any:
    """The narrowest type of ids below `count`: int8 (streams), int16 (kernel names nearly always)."""
    import numpy as np
    return np.int8 if count <= 1 << 7 else np.int16 if count <= 1 << 15 else np.int32


def _narrow(ids: "NDArray[np.int32]", count: int) -> "NDArray[Any]":
    """A batch's ids as _index_type(count) (the ids so far are below count)."""
    return ids.astype(_index_type(count), copy=False)


def _fits_int32(values: "NDArray[Any]") -> bool:
    return not len(values) or (int(values.min()) >= -(1 << 31) and int(values.max()) < 1 << 31)


def _batches(scan: "pl.LazyFrame") -> Iterator["pl.DataFrame"]:
    """The query's result in batches of about BATCH_ROWS rows (polars >= 1.31 streams them; older
    releases collect the columns whole, which holds them in memory at once)."""
    if hasattr(scan, "collect_batches"):
        with _reader_settings(finishes=False):
            yield from scan.collect_batches(chunk_size=BATCH_ROWS)
        return
    with _reader_settings():
        frame = scan.collect()
    for offset in range(0, len(frame), BATCH_ROWS):
        yield frame.slice(offset, BATCH_ROWS)


def trace_columns(path: Path, name_col: str, start_col: str, end_col: str, stream_cols: tuple[str, ...] = (),
                  correlation_col: str | None = None, feed: "TimelineFeed | None" = None) -> TraceColumns:
    """One pass over a trace file: the columns the tables and the timeline need, batch by batch
    (the file's text never held whole). A row without its timestamps is a FormatError naming its line.
    `feed`: given every batch as it is parsed (the timeline made during the parse)."""
    import numpy as np
    pl = _polars()

    header = csv_header(path)
    missing = [c for c in (name_col, start_col, end_col) if c not in header]
    if missing:
        raise FormatError(f"{path}: not the expected file: missing column(s) {', '.join(missing)} "
                          f"(header has {len(header)} columns)")
    streams = tuple(c for c in stream_cols if c in header)
    correlation = correlation_col if correlation_col in header else None
    numbers = [start_col, end_col] + ([correlation] if correlation else [])
    # Names and stream keys become categorical codes inside polars' engine (in parallel with the
    # parsing; polars < 1.32 has no per-query categories: hashes there); an empty cell reads as ""
    # as the csv module reads it.
    name = pl.col(name_col).fill_null("")
    stream = pl.concat_str([pl.col(c).fill_null("") for c in streams], separator=":") if streams else pl.lit("")
    stream_hash = key_hash(streams)
    base = pl.scan_csv(path, infer_schema=False, low_memory=False, schema_overrides={c: pl.Int64 for c in numbers})
    categorical = per_query_categories(pl)
    names: "_FirstSeen | _Dictionary"
    keys: "_HashedKeys | _Dictionary"
    if categorical:
        name_categories = pl.Categories.random()
        names, keys = _FirstSeen(name_categories), _HashedKeys()
        # stream keys as their hash (a categorical of the joined key cost 0.9 s of CPU at 10 M rows):
        # their few texts are read afterwards (_HashedKeys.texts)
        scan = base.select(*numbers, name.cast(pl.Categorical(name_categories)).to_physical().alias("name"),
                           *([stream_hash.alias("stream_hash")] if streams else []))
    else:
        names, keys = _Dictionary(), _Dictionary()
        scan = base.select(*numbers, name.alias("name"), name.hash(HASH_SEED).alias("name_hash"),
                           stream.alias("stream"), stream_hash.alias("stream_hash"))
    capacity = estimated_rows(path)
    # ends held as durations (int32 while every one fits: half the column) while polars' engine holds
    # its own buffers; the int64 ends are made once it has finished
    starts, durations = _Offsets(capacity), _Growing(capacity, np.int32)
    name_ids, stream_ids = _Growing(capacity, np.int8), _Growing(capacity, np.int8)
    # correlation ids as int32 while every one fits: half the column
    corr_ids = _Growing(capacity if correlation else 0, np.int32)
    rows = 0
    try:
        for batch in _batches(scan):
            if not len(batch):
                continue
            if batch[start_col].null_count() or batch[end_col].null_count():  # counts polars keeps: no pass
                bad = batch[start_col].is_null() | batch[end_col].is_null()
                raise FormatError(f"{path}:{rows + int(bad.arg_true()[0]) + 2}: truncated or malformed row")
            start_values = batch[start_col].to_numpy()
            end_values = batch[end_col].to_numpy()
            duration = end_values - start_values
            # int32 where every duration of the batch fits (the column widens to int64 otherwise),
            # written into the column as it is (no narrowed copy first)
            starts.add(start_values)
            durations.add(duration, narrows=_fits_int32(duration))
            del duration
            batch_streams: "NDArray[Any] | None" = None
            if isinstance(names, _FirstSeen) and isinstance(keys, _HashedKeys):
                batch_names = _narrow(names.ids(batch["name"].to_numpy()), len(names.codes))
                if streams:
                    batch_streams = _narrow(keys.ids(batch["stream_hash"].to_numpy(), rows), len(keys.first_rows))
                    if stream_ids.size or len(keys.first_rows) > 1:
                        if not stream_ids.size and rows:  # the rows before held the one key so far
                            stream_ids.add(np.zeros(rows, dtype=np.int8))
                        stream_ids.add(batch_streams)
            elif isinstance(names, _Dictionary) and isinstance(keys, _Dictionary):
                batch_names = _narrow(names.codes(batch["name_hash"].to_numpy(), batch["name"], rows),
                                      len(names.values))
                if streams:
                    batch_streams = _narrow(keys.codes(batch["stream_hash"].to_numpy(), batch["stream"], rows),
                                            len(keys.values))
                    stream_ids.add(batch_streams)
            name_ids.add(batch_names)
            values = batch[correlation].fill_null(-1).to_numpy() if correlation else None
            if values is not None:
                corr_ids.add(values.astype(np.int32) if _fits_int32(values) else values)
            if feed is not None:
                feed.add(start_values, end_values,
                         batch_streams if batch_streams is not None else np.broadcast_to(np.int8(0), (len(batch),)),
                         batch_names, values if values is not None else np.broadcast_to(np.int64(-1), (len(batch),)),
                         names.texts_so_far())
            del start_values, end_values, values
            rows += len(batch)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise malformed(path, exc) from None
    # The start column written on a second core while this one makes the kernel table from the
    # durations (a 32-bit column, most often): after the parse only this thread would work. The
    # worker allocates nothing (every column is made here): a thread's own malloc arena kept its
    # temporaries' pages (55 MB more peak with the kernel table there, 8 x 1 M ranks). The end column
    # is made once the offsets are let go: never both int64 columns beside both 32-bit ones (40 MB
    # less peak at 10 M rows).
    from concurrent.futures import ThreadPoolExecutor  # here: only large files take this path
    name_column, name_texts, duration_column = name_ids.column(), names.values, durations.column()
    start_column = starts.column.column() if starts.wide else np.empty(starts.column.size, dtype=np.int64)

    def fill_starts() -> None:
        if not starts.wide:
            starts.fill(start_column)

    def fill_ends(low: int, high: int) -> None:
        for at in range(low, high, 1 << 20):
            stop = min(at + (1 << 20), high)
            np.add(start_column[at:stop], duration_column[at:stop], out=end_column[at:stop])
    with ThreadPoolExecutor(max_workers=1) as pool:
        made = pool.submit(fill_starts)
        known_stats = name_stats(name_column, name_texts, duration=duration_column)
        made.result()
        del starts
        end_column = np.empty(len(start_column), dtype=np.int64)
        middle = len(start_column) // 2  # each thread one half
        made = pool.submit(fill_ends, middle, len(start_column))
        fill_ends(0, middle)
        made.result()
    del duration_column
    del durations
    return TraceColumns(start=start_column, end=end_column, name=name_column, names=name_texts,
                        # one stream key throughout: one shared value, not a column
                        stream=(stream_ids.column() if stream_ids.size else
                                np.broadcast_to(np.int32(0), (rows,))) if streams else None,
                        streams=(keys.values if isinstance(keys, _Dictionary) else
                                 keys.texts(path, base, stream, stream_hash)),
                        known_stats=known_stats,
                        correlation=corr_ids.column() if correlation else None)


ESTIMATE_BYTES = 1 << 20  # the file's first MiB gives its bytes per row


def estimated_rows(path: Path) -> int:
    """An estimate of the file's row count from its first MiB, with room to spare (unwritten room
    costs no memory: its pages are never committed)."""
    import os
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(ESTIMATE_BYTES)
    except OSError:
        return 1 << 16
    lines = max(head.count(b"\n"), 1)
    return int(size / (len(head) / lines) * 1.25) + (1 << 16)


class _Offsets:
    """int64 values (start timestamps) held as int32 offsets from each batch's smallest value while
    every batch's range fits (a batch of 64 Ki dispatches spans far less than 2 s), as int64 from
    the first batch that does not: half the column while polars' engine holds its own buffers."""

    def __init__(self, capacity: int) -> None:
        import numpy as np
        self.column = _Growing(capacity, np.int32)
        self.bases: list[tuple[int, int]] = []  # (first row, base) per batch while offsets
        self.wide = False

    def add(self, values: "NDArray[np.int64]") -> None:
        import numpy as np
        if not len(values):
            return
        if not self.wide:
            base = int(values.min())
            if int(values.max()) - base < 1 << 31:
                self.bases.append((self.column.size, base))
                self.column.add_offsets(values, base)
                return
            whole = self.values()  # the offsets so far as int64, then every value as it is
            self.column = _Growing(max(len(self.column.data), len(whole)), np.int64)
            self.column.add(whole)
            self.wide = True
        self.column.add(values)

    def values(self) -> "NDArray[np.int64]":
        import numpy as np
        if self.wide:
            return self.column.column()
        out = np.empty(self.column.size, dtype=np.int64)
        self.fill(out)
        return out

    def fill(self, out: "NDArray[np.int64]") -> None:
        """The offsets as int64 values written into `out` (allocates nothing: run on a worker thread,
        whose own malloc arena would keep what it allocated); wide values need none (`values`)."""
        import numpy as np
        assert not self.wide
        held = self.column.column()
        for i, (row, base) in enumerate(self.bases):
            stop = self.bases[i + 1][0] if i + 1 < len(self.bases) else len(held)
            np.add(held[row:stop], np.int64(base), out=out[row:stop])


class _Growing:
    """A column written batch by batch into one array sized once from the estimated row count (a
    list of batches joined at the end held each column twice), grown only where the estimate was
    short; integer ids wider than the array so far widen it."""

    def __init__(self, capacity: int, dtype: Any) -> None:
        import numpy as np
        self.data = np.empty(capacity, dtype=dtype)
        self.size = 0

    def widen(self, dtype: Any) -> None:
        import numpy as np
        if np.dtype(dtype).itemsize > self.data.dtype.itemsize:
            self.data = self.data.astype(dtype)

    def add(self, values: "NDArray[Any]", narrows: bool = False) -> None:
        """`narrows`: every value fits the column as it is (written narrowed, not widening it)."""
        if not narrows:
            self.widen(values.dtype)
        self._room(len(values))[:] = values
        self.size += len(values)

    def add_offsets(self, values: "NDArray[np.int64]", base: int) -> None:
        """values - base, each of which fits the column, written into it without a temporary."""
        import numpy as np
        np.subtract(values, np.int64(base), out=self._room(len(values)), casting="unsafe")
        self.size += len(values)

    def _room(self, count: int) -> "NDArray[Any]":
        """The next `count` unwritten slots."""
        import numpy as np
        if self.size + count > len(self.data):  # more rows than estimated: grow (a copy, rare)
            grown = np.empty(max(self.size + count, len(self.data) * 3 // 2), dtype=self.data.dtype)
            grown[:self.size] = self.data[:self.size]
            self.data = grown
        return self.data[self.size:self.size + count]

    def column(self) -> "NDArray[Any]":
        return self.data[:self.size]

def fast_enough(path: Path) -> bool:
    """A file large enough for polars' engine to pay (when it is installed)."""
    return path.stat().st_size >= FAST_PATH_MIN_BYTES and fast_engine_available()


def named_columns(path: Path, text: tuple[str, ...], numbers: tuple[str, ...],
             optional: tuple[str, ...] = ("Correlation_Id",)) -> dict[str, list[Any]]:
    """The named columns of a trace file (numbers as int); polars for large files, else csv. An
    `optional` column the file lacks (older releases, hand-trimmed files) reads as -1 throughout."""
    header = csv_header(path)
    absent = tuple(c for c in optional if c in numbers and c not in header)
    numbers = tuple(c for c in numbers if c not in absent)
    if fast_enough(path):
        import polars as pl
        try:
            frame = pl.read_csv(path, columns=list(text + numbers), infer_schema=False,
                                schema_overrides={c: pl.Int64 for c in numbers})
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise malformed(path, exc) from None
        for c in numbers:
            if c not in optional and frame[c].null_count():
                raise FormatError(f"{path}: {frame[c].null_count()} row(s) with no {c}")
        out = {c: frame[c].fill_null(-1).to_list() if c in numbers else frame[c].to_list() for c in text + numbers}
    else:
        out = {c: [] for c in text + numbers}
        for line, row in read_csv(path, text + numbers):
            for c in text:
                out[c].append(row[c])
            for c in numbers:
                out[c].append(-1 if c in optional and row[c] in ("", None) else int(number(path, line, row[c])))
    rows = len(out[(text + numbers)[0]]) if text + numbers else 0
    out.update({c: [-1] * rows for c in absent})
    return out
