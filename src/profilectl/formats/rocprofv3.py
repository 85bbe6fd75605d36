"""rocprofv3 CSV output (<dir>/<hostname>/<pid>_kernel_trace.csv, _counter_collection.csv,
_hip_api_trace.csv, _memory_copy_trace.csv ...), its Perfetto files, and its counter listing.

Columns by name: 6.2 kernel traces lack Stream_Id/Thread_Id, and the 6.2 counter collection has 15
columns instead of 19; only the columns read here are required.
"""

from __future__ import annotations

import functools
import json

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl.formats import polars_csv, ranks
from profilectl.errors import FormatError
from profilectl.formats.common import csv_header, number, read_csv
from profilectl.formats.reader import Reader
from profilectl.formats.tables import (PER_DISPATCH, CounterValue, KernelStats, RankRow, StatsByName, Tables,
                                       merge_stats)

if TYPE_CHECKING:
    from profilectl.analysis.timeline import RankTimeline

KINDS = ("kernel_trace", "counter_collection", "hip_api_trace", "hip_runtime_api_trace", "memory_copy_trace",
         "marker_api_trace")
API_KINDS = ("hip_api_trace", "hip_runtime_api_trace")
# Timeline analysis holds a trace's events in memory (~40 bytes each): above this much CSV per rank
# (about 4 million dispatches) the tables are still read, streamed, but the timeline is left out.
TIMELINE_MAX_BYTES = 1536 * 2**20
# ROCTx ranges that mark steps: torch's own names, or "step 12" / "step#12" of a user's roctxRangePush
STEP_NAME = re.compile(r"^(?:ProfilerStep#|step[ #_:-]?)(\d+)$", re.IGNORECASE)


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
        fast = path.stat().st_size >= polars_csv.FAST_PATH_MIN_BYTES and polars_csv.fast_engine_available()
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
    rows = tuple(ranks.rank_row(rank, host, stats) for (rank, host), stats in sorted(
        per_rank.items(), key=lambda item: (item[0][1] or "", item[0][0])))
    return merged, rows


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


def _columns(path: Path, text: tuple[str, ...], numbers: tuple[str, ...],
             optional: tuple[str, ...] = ("Correlation_Id",)) -> dict[str, list[Any]]:
    """The named columns of a trace file (numbers as int); polars for large files, else csv. An
    `optional` column the file lacks (older releases, hand-trimmed files) reads as -1 throughout."""
    header = csv_header(path)
    absent = tuple(c for c in optional if c in numbers and c not in header)
    numbers = tuple(c for c in numbers if c not in absent)
    if path.stat().st_size >= polars_csv.FAST_PATH_MIN_BYTES and polars_csv.fast_engine_available():
        import polars as pl
        try:
            frame = pl.read_csv(path, columns=list(text + numbers), infer_schema=False,
                                schema_overrides={c: pl.Int64 for c in numbers})
        except (pl.exceptions.PolarsError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FormatError(f"{path}: truncated or malformed CSV ({first[:200]})") from None
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


def timelines(by_kind: dict[str, list[Path]]) -> tuple[tuple["RankTimeline", ...], tuple[str, ...]]:
    """One timeline per rank (process) from its kernel, copy, API and marker traces."""
    from profilectl.analysis.timeline import Marker, rank_timeline
    per_rank: dict[tuple[str, str | None], dict[str, list[Path]]] = {}
    for kind in ("kernel_trace", "memory_copy_trace", *API_KINDS, "marker_api_trace"):
        for path in by_kind.get(kind, []):
            rank, host = ranks.identity(path)
            if rank == path.stem:  # no pid or rank in the name (a renamed file): the one process
                rank = "0"
            per_rank.setdefault((rank, host), {}).setdefault(kind, []).append(path)
    found, notes = [], []
    for (rank, host), files in sorted(per_rank.items(), key=lambda item: (item[0][1] or "", item[0][0])):
        if "kernel_trace" not in files:
            continue
        size = sum(p.stat().st_size for paths in files.values() for p in paths)
        if size > TIMELINE_MAX_BYTES:
            notes.append(f"no timeline analysis for rank {rank}: its traces hold {size / 2**30:.1f} GiB (more than "
                         f"{TIMELINE_MAX_BYTES / 2**30:.1f} GiB); the tables above are complete")
            continue
        names: dict[str, int] = {}
        streams: dict[str, int] = {}
        start: list[int] = []
        end: list[int] = []
        stream: list[int] = []
        kind_of_event: list[int] = []
        name: list[int] = []
        correlation: list[int] = []
        for kind, code, name_col, stream_cols in (("kernel_trace", 0, "Kernel_Name", ("Agent_Id", "Queue_Id")),
                                                   ("memory_copy_trace", 1, "Direction", ("Kind", "Stream_Id"))):
            for path in files.get(kind, []):
                header = csv_header(path)
                present = tuple(c for c in stream_cols if c in header)
                cols = _columns(path, (name_col, *present), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
                keys = [":".join(parts) for parts in zip(*(cols[c] for c in present))] if present else \
                    [kind] * len(cols[name_col])
                start += cols["Start_Timestamp"]
                end += cols["End_Timestamp"]
                correlation += cols["Correlation_Id"]
                stream += [streams.setdefault(k, len(streams)) for k in keys]
                name += [names.setdefault(n, len(names)) for n in cols[name_col]]
                kind_of_event += [code] * len(keys)
        api = [_columns(p, (), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
               for kind in API_KINDS for p in files.get(kind, [])]
        markers = []
        for path in files.get("marker_api_trace", []):
            cols = _columns(path, ("Function",), ("Start_Timestamp", "End_Timestamp"))
            markers += [Marker(f, a, b, False) for f, a, b in zip(cols["Function"], cols["Start_Timestamp"],
                                                                  cols["End_Timestamp"])
                        if b > a and STEP_NAME.match(f)]
        found.append(rank_timeline(
            rank, host, start=start, end=end, stream=stream, kind=kind_of_event, name=name, correlation=correlation,
            names=list(names), streams=list(streams), api_start=[t for c in api for t in c["Start_Timestamp"]],
            api_end=[t for c in api for t in c["End_Timestamp"]],
            api_correlation=[t for c in api for t in c["Correlation_Id"]], markers=markers))
    return tuple(found), tuple(notes)


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

    def read(self, files: list[Path]) -> Tables:
        by_kind: dict[str, list[Path]] = {}
        for path in files:
            by_kind.setdefault(kind_of(path.name) or "", []).append(path)
        kernels, ranks = kernel_trace(by_kind["kernel_trace"]) if "kernel_trace" in by_kind else ({}, ())
        api = [p for kind in API_KINDS for p in by_kind.get(kind, [])]
        traces = by_kind.get("kernel_trace", [])
        empty = (f"{len(traces)} kernel trace file(s) hold zero kernel dispatches",) if traces and not kernels else ()
        try:
            found, notes = timelines(by_kind) if kernels else ((), ())
        except FormatError as exc:  # the tables stand without it
            found, notes = (), (f"no timeline analysis: {exc}",)
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0,
                      api=named_intervals(api, "Function") if api else {},
                      memory_copies=named_intervals(by_kind.get("memory_copy_trace", []), "Direction"),
                      counters=counter_collection(by_kind.get("counter_collection", [])),
                      ranks=ranks if len(ranks) > 1 else (), notes=empty + notes, timelines=found)


class PerfettoTraceReader(Reader):
    """rocprofv3's --output-format pftrace files: opened in Perfetto, nothing to tabulate."""
    kind = "perfetto-trace"

    def recognises(self, path: Path) -> bool:
        return path.suffix == ".pftrace"

    def read(self, files: list[Path]) -> Tables:
        return Tables(trace_files=tuple(str(p) for p in files), notes=made_by_notes(files))

    def read_file(self, path: Path) -> Tables:
        return Tables(trace_files=(str(path),))

