"""rocprofv3 CSV output (<dir>/<hostname>/<pid>_kernel_trace.csv, _counter_collection.csv,
_hip_api_trace.csv, _memory_copy_trace.csv ...), its Perfetto files, and its counter listing.

Columns by name: 6.2 kernel traces lack Stream_Id/Thread_Id, and the 6.2 counter collection has 15
columns instead of 19; only the columns read here are required.
"""

from __future__ import annotations

import dataclasses
import functools
import json

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl.formats import polars_csv, ranks
from profilectl.errors import FormatError
from profilectl.formats.common import csv_header, number, read_csv
from profilectl.formats.reader import Reader, release_freed_memory
from profilectl.model.timeline import sink
from profilectl.model.tables import (PER_DISPATCH, AnnotationRow, CounterValue, KernelStats, RankRow, StatsByName,
                                       Tables, merge_stats)

if TYPE_CHECKING:
    from profilectl.model.reductions import RankReduction
    from profilectl.model.timeline import TimelineFeed
    from profilectl.model.timeline import RankTimeline

KINDS = ("kernel_trace", "counter_collection", "hip_api_trace", "hip_runtime_api_trace", "memory_copy_trace",
         "marker_api_trace")
API_KINDS = ("hip_api_trace", "hip_runtime_api_trace")
# ROCTx ranges that mark steps: torch's own names, or "step 12" / "step#12" of a user's roctxRangePush


def kind_of(name: str) -> str | None:
    """<pid>_kernel_trace.csv -> kernel_trace (a file renamed without its pid prefix still counts)."""
    for kind in KINDS:
        if name == f"{kind}.csv" or name.endswith(f"_{kind}.csv"):
            return kind
    return None


def interval_stats(path: Path, name_col: str, fast: bool | None = None) -> StatsByName:
    """Duration (End - Start) statistics per value of name_col, for any rocprofv3 trace file:
    polars for large files when installed, else the csv module (the same numbers)."""
    if fast is None:
        fast = polars_csv.fast_enough(path)
    if fast:
        return polars_csv.grouped_durations_csv(path, name_col, "Start_Timestamp", "End_Timestamp")
    stats: StatsByName = {}
    for line, row in read_csv(path, (name_col, "Start_Timestamp", "End_Timestamp")):
        duration = number(path, line, row["End_Timestamp"]) - number(path, line, row["Start_Timestamp"])
        stats.setdefault(row[name_col], KernelStats()).add(duration)
    return stats


def kernel_trace(paths: list[Path], fast: bool | None = None) -> tuple[StatsByName, tuple[RankRow, ...]]:
    """All kernel traces merged, and one summary row per rank (process: see formats/ranks.py)."""
    merged: StatsByName = {}
    per_rank: dict[tuple[str, str | None], StatsByName] = {}
    # One file after the other: polars already spreads each file over the cores, and two polars
    # queries side by side only add up their memory (722 MB for 8 ranks in bench/ingest.py).
    for path in paths:
        per_file = interval_stats(path, "Kernel_Name", fast)
        merged = merge_stats(merged, per_file)
        key = ranks.identity(path)
        per_rank[key] = merge_stats(per_rank.get(key, {}), per_file)
    rows = tuple(ranks.rank_row(rank, host, stats)
                 for (rank, host), stats in sorted(per_rank.items(), key=_host_then_rank))
    return merged, rows


def _host_then_rank(item: tuple[tuple[str, str | None], Any]) -> tuple[str, str]:
    """Ranks in report order: by host, then by rank (process) id."""
    (rank, host), _ = item
    return host or "", rank


def named_intervals(paths: list[Path], name_col: str) -> StatsByName:
    return merge_stats(*(interval_stats(path, name_col) for path in paths))


def counter_collection(paths: list[Path]) -> tuple[CounterValue, ...]:
    """Per (kernel, counter): each row is one dispatch's value, with the dispatch's duration where
    the layout has timestamps (6.3+: Start_Timestamp/End_Timestamp; 6.2's 15 columns have none).

    Each pass re-runs the application, so a kernel's dispatches appear once per pass, each pass
    with its own counters; the values of a counter come from the passes that collected it.
    """
    values: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    for path in paths:
        for line, row in read_csv(path, ("Kernel_Name", "Counter_Name", "Counter_Value")):
            start, end = row.get("Start_Timestamp"), row.get("End_Timestamp")
            duration = number(path, line, end) - number(path, line, start) if start and end else None
            values.setdefault((row["Kernel_Name"], row["Counter_Name"]), []).append(
                (number(path, line, row["Counter_Value"]), duration))
    return tuple(CounterValue.of(kernel, counter, items) for (kernel, counter), items in values.items())




def _ranks_of(by_kind: dict[str, list[Path]]) -> dict[tuple[str, str | None], dict[str, list[Path]]]:
    """Each rank's (process's) files by kind, ranks by host, then rank."""
    per_rank: dict[tuple[str, str | None], dict[str, list[Path]]] = {}
    for kind in ("kernel_trace", "memory_copy_trace", *API_KINDS, "marker_api_trace"):
        for path in by_kind.get(kind, []):
            rank, host = ranks.identity(path)
            if rank == path.stem:  # no pid or rank in the name (a renamed file): the one process
                rank = "0"
            per_rank.setdefault((rank, host), {}).setdefault(kind, []).append(path)
    return dict(sorted(per_rank.items(), key=_host_then_rank))




def _intervals(path: Path, name_col: str, stream_cols: tuple[str, ...], correlation: bool,
               feed: "TimelineFeed | None" = None) -> "polars_csv.TraceColumns":
    """A kernel or copy trace's columns for the tables and the timeline, in one pass: polars batches
    for large files (given to `feed` as they are parsed), the csv module for small ones (the same
    numbers)."""
    import numpy as np
    if polars_csv.fast_enough(path):
        return polars_csv.trace_columns(path, name_col, "Start_Timestamp", "End_Timestamp", stream_cols,
                                        "Correlation_Id" if correlation else None, feed)
    header = csv_header(path)
    present = tuple(c for c in stream_cols if c in header)
    cols = polars_csv.named_columns(path, (name_col, *present), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
    names: dict[str, int] = {}
    # a stream is its columns' values (polars_csv.key_hash keys it so too); its text joins them
    keys: dict[tuple[str, ...], int] = {}
    stream = [keys.setdefault(parts, len(keys)) for parts in zip(*(cols[c] for c in present))] \
        if present else [keys.setdefault((), 0)] * len(cols[name_col])
    return polars_csv.TraceColumns(
        start=np.asarray(cols["Start_Timestamp"], dtype=np.int64), end=np.asarray(cols["End_Timestamp"], dtype=np.int64),
        name=np.asarray([names.setdefault(n, len(names)) for n in cols[name_col]], dtype=np.int32), names=list(names),
        stream=np.asarray(stream, dtype=np.int32), streams=[":".join(parts) for parts in keys],
        correlation=np.asarray(cols["Correlation_Id"], dtype=np.int64) if correlation else None)


def rank_timeline_of(rank: str, host: str | None, files: dict[str, list[Path]]
                     ) -> tuple["RankTimeline | None", list[tuple[Path, "polars_csv.TraceColumns"]]]:
    """One rank's timeline from its kernel, copy, API and marker traces, and each kernel trace's
    columns (its tables come from the same pass): numpy columns throughout, never a list per row."""
    import numpy as np
    from profilectl.model.timeline import KERNEL, STEP_NAME, Marker, rank_timeline, sink
    linked = any(files.get(kind) for kind in API_KINDS)  # correlation ids matter only with launch calls
    api = [polars_csv.named_columns(p, (), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
           for kind in API_KINDS for p in files.get(kind, [])]
    api_start, api_end, api_correlation = (
        np.concatenate([np.asarray(c[column], dtype=np.int64) for c in api]) if api else np.zeros(0, dtype=np.int64)
        for column in ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
    del api
    # one large kernel trace and nothing else on the GPU side: the timeline is made while it is parsed
    feed = None
    analyses = sink()  # the analysis package, where it is loaded (model/timeline.py)
    if analyses is not None and len(files.get("kernel_trace", [])) == 1 and not files.get("memory_copy_trace") and \
            polars_csv.fast_enough(files["kernel_trace"][0]):
        feed = analyses.feed(api_start, api_end, api_correlation, polars_csv.estimated_rows(files["kernel_trace"][0]),
                             KERNEL)
    kernels = [(p, _intervals(p, "Kernel_Name", ("Agent_Id", "Queue_Id"), linked, feed))
               for p in files.get("kernel_trace", [])]
    copies = [(p, _intervals(p, "Direction", ("Kind", "Stream_Id"), linked)) for p in files.get("memory_copy_trace", [])]
    parts = [(cols, code, kind) for code, kind, group in ((0, "kernel_trace", kernels), (1, "memory_copy_trace", copies))
             for _, cols in group]
    if not any(len(cols.start) for cols, _, _ in parts):
        return None, kernels
    names: dict[str, int] = {}
    streams: dict[str, int] = {}
    name_parts, stream_parts = [], []
    for cols, _, kind in parts:
        name_map = np.asarray([names.setdefault(n, len(names)) for n in cols.names] or [0], dtype=np.int32)
        # a file without stream columns is one stream, named by its kind (as before)
        keys = [k if k else kind for k in cols.streams] or [kind]
        stream_map = np.asarray([streams.setdefault(k, len(streams)) for k in keys], dtype=np.int32)
        # a rank's only file keeps its own ids (no copy of its columns)
        same_names = np.array_equal(name_map, np.arange(len(name_map)))
        name_parts.append(cols.name if same_names else name_map[cols.name])
        if len(stream_map) == 1 or cols.stream is None:  # one stream: one shared value, not a column
            stream_parts.append(np.broadcast_to(stream_map[0], (len(cols.start),)))
        else:
            stream_parts.append(cols.stream if np.array_equal(stream_map, np.arange(len(stream_map))) else
                                stream_map[cols.stream])
    markers = []
    for path in files.get("marker_api_trace", []):
        marks = polars_csv.named_columns(path, ("Function",), ("Start_Timestamp", "End_Timestamp"))
        markers += [Marker(f, a, b, False) for f, a, b in zip(marks["Function"], marks["Start_Timestamp"],
                                                              marks["End_Timestamp"])
                    if b > a and STEP_NAME.match(f)]
    one = len(parts) == 1
    timeline = rank_timeline(
        rank, host, start=parts[0][0].start if one else np.concatenate([c.start for c, _, _ in parts]),
        end=parts[0][0].end if one else np.concatenate([c.end for c, _, _ in parts]),
        stream=stream_parts[0] if one else np.concatenate(stream_parts),
        name=name_parts[0] if one else np.concatenate(name_parts),
        kind=np.broadcast_to(np.int8(parts[0][1]), (len(parts[0][0].start),)) if one else
        np.concatenate([np.full(len(c.start), code, dtype=np.int8) for c, code, _ in parts]),
        correlation=(parts[0][0].correlation if one and parts[0][0].correlation is not None else  # no copy
                     np.concatenate([c.correlation if c.correlation is not None else np.full(len(c.start), -1)
                                     for c, _, _ in parts])) if linked else None,
        names=list(names), streams=list(streams), api_start=api_start, api_end=api_end,
        api_correlation=api_correlation, markers=markers,
        streamed=feed.finish(rank, host, list(names), list(streams)) if feed is not None else None)
    return timeline, kernels


CONVERTED = "rocpd-convert"  # where tool_helpers/rocpd_convert.py puts `rocpd convert`'s files


def converted_beside_database(path: Path) -> bool:
    """A CSV that `rocpd convert` made from a database still in the run's raw folder: the
    database is read instead (reading both would count every kernel twice)."""
    parts = path.parts
    if CONVERTED not in parts:
        return False
    raw = Path(*parts[:len(parts) - 1 - parts[::-1].index(CONVERTED)])
    return _has_database(raw)


@functools.lru_cache(maxsize=64)
def _has_database(raw: Path) -> bool:
    return any(p.name.endswith("_results.db") and CONVERTED not in p.parts for p in raw.rglob("*.db"))


def made_by_notes(paths: list[Path]) -> tuple[str, ...]:
    """Which tool made the converted files (rocpd-convert/made-by.json), for the run's notes."""
    notes = []
    roots = {Path(*p.parts[:len(p.parts) - p.parts[::-1].index(CONVERTED)]) for p in paths if CONVERTED in p.parts}
    for made_by in sorted(root / "made-by.json" for root in roots):
        try:
            record = json.loads(made_by.read_text())
        except (OSError, ValueError):
            continue
        by_tool: dict[str, list[str]] = {}
        for name, entry in (record.get("files") or {}).items():
            by_tool.setdefault(f"{entry.get('tool')} from {entry.get('from')}", []).append(name)
        notes += [f"{', '.join(sorted(files))} made by {tool}" for tool, files in sorted(by_tool.items())]
    return tuple(dict.fromkeys(notes))


class Rocprofv3CsvReader(Reader):
    kind = "rocprofv3-csv"

    def recognises(self, path: Path) -> bool:
        kind = kind_of(path.name)
        if kind is None or converted_beside_database(path):
            return False
        # From 7.0 profilectl asks for rocpd beside csv: <pid>_results.db holds the same records, and
        # is read instead (reading both would count every kernel twice).
        prefix = path.name[: -len(f"{kind}.csv")]
        return not (prefix and (path.parent / f"{prefix}results.db").exists())

    reduces_ranks = True

    def read_reducing(self, files: list[Path]) -> Tables:
        return self.read(files, reduce_ranks=True)

    def read(self, files: list[Path], reduce_ranks: bool = False) -> Tables:
        """`reduce_ranks` (read_reducing): with several ranks, each rank's timeline is reduced as soon
        as it is read (Tables.reductions), and let go before the next rank is parsed."""
        by_kind: dict[str, list[Path]] = {}
        for path in files:
            by_kind.setdefault(kind_of(path.name) or "", []).append(path)
        if not polars_csv.fast_engine_available():
            return self._read_slowly(by_kind)
        # One pass per kernel trace gives both its table and its timeline columns; each rank's
        # timeline is built and kept as numpy columns, ranks one after the other.
        kernels: StatsByName = {}
        per_rank: dict[tuple[str, str | None], StatsByName] = {}
        found: list[RankTimeline] = []
        notes: list[str] = []
        traced = [(key, rank_files) for key, rank_files in _ranks_of(by_kind).items() if "kernel_trace" in rank_files]
        analyses = sink()  # reductions need the analysis package (model/timeline.py sink)
        reductions: list[RankReduction] | None = [] if reduce_ranks and len(traced) > 1 and analyses else None
        for (rank, host), rank_files in traced:
            columns: list[tuple[Path, polars_csv.TraceColumns | None]]
            try:
                timeline, read = rank_timeline_of(rank, host, rank_files)
                columns = list(read)
            except FormatError as exc:
                if not any(polars_csv.fast_enough(p) for p in rank_files["kernel_trace"]):
                    raise
                # the kernel table stands without the timeline (a trace whose copy or API file is broken)
                timeline, notes = None, [*notes, f"no timeline analysis: {exc}"]
                columns = [(p, None) for p in rank_files["kernel_trace"]]
            for path, cols in columns:
                stats = cols.stats() if cols is not None else interval_stats(path, "Kernel_Name")
                kernels = merge_stats(kernels, stats)
                key = ranks.identity(path)
                per_rank[key] = merge_stats(per_rank.get(key, {}), stats)
            if timeline is not None and kernels:
                if reductions is None:
                    found.append(timeline)
                else:
                    reductions += analyses.reduce((timeline,))  # type: ignore[union-attr]  # set above
            # the rank's columns go before the next rank is parsed (nothing else holds them when reduced)
            timeline, read, columns, cols = None, [], [], None
            if reductions is not None:
                release_freed_memory()
        rank_rows = tuple(ranks.rank_row(rank, host, stats) for (rank, host), stats in sorted(per_rank.items(),
                                                                                              key=_host_then_rank))
        tables = self._tables(by_kind, kernels, rank_rows, tuple(found), tuple(notes))
        if not reductions:  # one rank, or no timeline: as `read`
            return tables
        return dataclasses.replace(tables, reductions=tuple(reductions))

    def _read_slowly(self, by_kind: dict[str, list[Path]]) -> Tables:
        """Without polars: the csv module (the same numbers, slower on large files)."""
        kernels, rank_rows = kernel_trace(by_kind["kernel_trace"]) if "kernel_trace" in by_kind else ({}, ())
        try:
            found: tuple[RankTimeline, ...] = tuple(
                t for (rank, host), rank_files in _ranks_of(by_kind).items()
                if "kernel_trace" in rank_files for t in (rank_timeline_of(rank, host, rank_files)[0],)
                if t is not None) if kernels else ()
            notes: tuple[str, ...] = ()
        except FormatError as exc:  # the tables stand without it
            found, notes = (), (f"no timeline analysis: {exc}",)
        return self._tables(by_kind, kernels, rank_rows, found, notes)

    @staticmethod
    def _tables(by_kind: dict[str, list[Path]], kernels: StatsByName, rank_rows: tuple[RankRow, ...],
                found: tuple["RankTimeline", ...], notes: tuple[str, ...]) -> Tables:
        api = [p for kind in API_KINDS for p in by_kind.get(kind, [])]
        traces = by_kind.get("kernel_trace", [])
        empty = (f"{len(traces)} kernel trace file(s) hold zero kernel dispatches",) if traces and not kernels else ()
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0,
                      api=named_intervals(api, "Function") if api else {},
                      memory_copies=named_intervals(by_kind.get("memory_copy_trace", []), "Direction"),
                      counters=counter_collection(by_kind.get("counter_collection", [])),
                      ranks=rank_rows if len(rank_rows) > 1 else (), notes=empty + notes, timelines=found,
                      annotations=roctx_annotations(by_kind))


def roctx_annotations(by_kind: dict[str, list[Path]]) -> tuple[AnnotationRow, ...]:
    """ROCTx ranges of every rank as user annotations (formats/roctx.py)."""
    if not by_kind.get("marker_api_trace"):
        return ()
    from profilectl.formats import roctx
    return tuple(row for (rank, _host), files in sorted(_ranks_of(by_kind).items(), key=lambda item: (item[0][1] or "",
                                                                                                       item[0][0]))
                 for row in roctx.rank_annotations(rank, files))


class PerfettoTraceReader(Reader):
    """rocprofv3's --output-format pftrace files: opened in Perfetto, nothing to tabulate."""
    kind = "perfetto-trace"

    def recognises(self, path: Path) -> bool:
        return path.suffix == ".pftrace"

    def read(self, files: list[Path]) -> Tables:
        return Tables(trace_files=tuple(str(p) for p in files), notes=made_by_notes(files))

    def read_file(self, path: Path) -> Tables:
        return Tables(trace_files=(str(path),))

