"""ROCTx ranges (rocprofv3 --marker-trace, `<pid>_marker_api_trace.csv`) as user annotations: the
same table as torch's record_function ranges (formats/tables.py AnnotationRow).

rocprofv3 writes one row per range: roctxRangePush/Pop and roctxRangeStart/Stop rows carry the
message in `Function`, the range's start and end, and the thread (`Thread_Id`; 0 for a
Start/Stop range, which belongs to the process, not to a thread: rocprofiler-sdk's documented
sample, fixtures/rocprofv3-docs/marker_api_trace.csv; its ROCTx guide, using-rocprofiler-sdk-roctx.rst:
"Start and End ... can start and end on different threads"). A roctxMark is a row whose start equals its
end: an instant, not a range, and left out of the table.

Per rank and name: calls, total, self (total less the ranges nested directly inside it on its
thread) and the GPU time of the kernels and copies whose launch call (HIP API trace, linked by
Correlation_Id) began inside the range on its thread; None where the run traced no HIP API call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from profilectl.formats.tables import AnnotationRow

PROCESS_THREAD = 0  # Thread_Id of a roctxRangeStart/Stop range: the whole process


@dataclass(frozen=True)
class Range:
    name: str
    thread: int
    start: int
    end: int


def ranges_of(paths: Iterable[Path]) -> list[Range]:
    """The ranges (not the instant marks) of marker_api_trace files."""
    from profilectl.formats.rocprofv3 import _columns
    found = []
    for path in paths:
        cols = _columns(path, ("Function",), ("Thread_Id", "Start_Timestamp", "End_Timestamp"), optional=("Thread_Id",))
        found += [Range(name, thread, start, end) for name, thread, start, end in
                  zip(cols["Function"], cols["Thread_Id"], cols["Start_Timestamp"], cols["End_Timestamp"])
                  if end > start]
    return found


@dataclass(frozen=True)
class Launches:
    """HIP API calls (thread, start, correlation id) and each correlation id's GPU time (ns)."""
    thread: Sequence[int]
    start: Sequence[int]
    correlation: Sequence[int]
    gpu_ns: dict[int, int]


def launches_of(api_paths: Iterable[Path], activity_paths: Iterable[Path]) -> Launches:
    """API calls of hip_api_trace / hip_runtime_api_trace files, and the durations of the kernel and
    copy rows (kernel_trace, memory_copy_trace) by their Correlation_Id."""
    from profilectl.formats.rocprofv3 import _columns
    thread: list[int] = []
    start: list[int] = []
    correlation: list[int] = []
    for path in api_paths:
        cols = _columns(path, (), ("Thread_Id", "Start_Timestamp", "Correlation_Id"))
        thread += cols["Thread_Id"]
        start += cols["Start_Timestamp"]
        correlation += cols["Correlation_Id"]
    gpu_ns: dict[int, int] = {}
    for path in activity_paths:
        cols = _columns(path, (), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
        for c, a, b in zip(cols["Correlation_Id"], cols["Start_Timestamp"], cols["End_Timestamp"]):
            if c >= 0:
                gpu_ns[c] = gpu_ns.get(c, 0) + (b - a)
    return Launches(thread, start, correlation, gpu_ns)


def self_times(ranges: list[Range]) -> list[int]:
    """Each range's total less the ranges directly nested inside it on the same thread (a stack per
    thread over ranges ordered by start, the longer first at equal starts)."""
    order = sorted(range(len(ranges)), key=lambda i: (ranges[i].thread, ranges[i].start, -ranges[i].end))
    own = [r.end - r.start for r in ranges]
    stack: list[int] = []
    thread = None
    for i in order:
        r = ranges[i]
        if r.thread != thread:
            stack, thread = [], r.thread
        while stack and ranges[stack[-1]].end <= r.start:
            stack.pop()
        if stack and r.end <= ranges[stack[-1]].end:  # inside its parent: the parent's self time shrinks
            own[stack[-1]] -= r.end - r.start
        stack.append(i)
    return own


def _gpu_times(ranges: list[Range], launches: Launches) -> list[int]:
    """Per range: the GPU time of the activity launched by a call that began inside it on its thread
    (on any thread for a process-wide range)."""
    import numpy as np
    thread = np.asarray(launches.thread, dtype=np.int64)
    start = np.asarray(launches.start, dtype=np.int64)
    gpu = np.asarray([launches.gpu_ns.get(c, 0) for c in launches.correlation], dtype=np.int64)
    out = []
    for r in ranges:
        inside = (start >= r.start) & (start <= r.end)
        if r.thread != PROCESS_THREAD:
            inside &= thread == r.thread
        out.append(int(gpu[inside].sum()))
    return out


def annotation_rows(rank: str, ranges: list[Range], launches: Launches | None) -> tuple[AnnotationRow, ...]:
    """One row per range name of one rank; gpu_ns None without launch calls to link."""
    own = self_times(ranges)
    gpu = _gpu_times(ranges, launches) if launches is not None and len(launches.start) else None
    rows: dict[str, list[int]] = {}
    for i, r in enumerate(ranges):
        total = r.end - r.start
        row = rows.setdefault(r.name, [0, 0, 0, 0, total, total])
        row[0] += 1
        row[1] += total
        row[2] += own[i]
        row[3] += gpu[i] if gpu is not None else 0
        row[4], row[5] = min(row[4], total), max(row[5], total)
    return tuple(AnnotationRow(rank=rank, name=name, calls=n, total_ns=total, self_ns=self_ns,
                               gpu_ns=gpu_ns if gpu is not None else None, min_ns=low, max_ns=high)
                 for name, (n, total, self_ns, gpu_ns, low, high) in rows.items())


def rank_annotations(rank: str, files: dict[str, list[Path]]) -> tuple[AnnotationRow, ...]:
    """One rank's ROCTx annotations from its rocprofv3 files by kind (formats/rocprofv3.py KINDS)."""
    markers = files.get("marker_api_trace", [])
    if not markers:
        return ()
    ranges = ranges_of(markers)
    if not ranges:
        return ()
    api = files.get("hip_api_trace", []) + files.get("hip_runtime_api_trace", [])
    launches = launches_of(api, files.get("kernel_trace", []) + files.get("memory_copy_trace", [])) if api else None
    return annotation_rows(rank, ranges, launches)


# ---------------------------------------------------------------- rocpd databases
# rocprofiler-sdk's rocpd schema (source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql, marker_views.sql):
# a ROCTx range is a rocpd_region whose rocpd_event's category string names a MARKER domain, its
# message in the event's extdata ($.message); its thread is the region's track (rocpd_track.tid).
# HIP API calls are regions of a HIP category with the event's correlation_id, which the kernel
# dispatch's and the memory copy's events share.


def rocpd_annotations(path: Path, rank: str) -> tuple[AnnotationRow, ...]:
    """One rank's ROCTx ranges from a rocpd database; () where it holds none (or an older schema
    without event categories)."""
    import sqlite3
    from profilectl.formats import rocpd
    db = rocpd._connect(path)
    try:
        columns, events = rocpd._columns(db, "rocpd_region"), rocpd._columns(db, "rocpd_event")
        if "event_id" not in columns or not {"category_id", "correlation_id"} <= events:
            return ()
        source, _ = rocpd._interval(db, "rocpd_region", "R")
        start, end = ("TS.value", "TE.value") if "rocpd_timestamp" in source else ("R.start", 'R."end"')
        thread = "R.tid" if "tid" in columns else "0"
        if thread == "0" and "track_id" in columns and "tid" in rocpd._columns(db, "rocpd_track"):
            source += " LEFT JOIN rocpd_track TR ON TR.id = R.track_id AND TR.guid = R.guid"
            thread = "coalesce(TR.tid, 0)"
        message = "json_extract(EV.extdata, '$.message')" if "extdata" in events else "NAME.string"
        rows = db.execute(
            f"SELECT {start}, {end}, {thread}, CAT.string, coalesce({message}, NAME.string), "
            f"coalesce(EV.correlation_id, -1) FROM {source} "
            "JOIN rocpd_event EV ON EV.id = R.event_id AND EV.guid = R.guid "
            "JOIN rocpd_string CAT ON CAT.id = EV.category_id AND CAT.guid = EV.guid "
            "LEFT JOIN rocpd_string NAME ON NAME.id = R.name_id AND NAME.guid = R.guid "
            "WHERE CAT.string LIKE '%MARKER%' OR CAT.string LIKE 'HIP%'").fetchall()
        ranges = [Range(str(text), int(tid), int(a), int(b)) for a, b, tid, category, text, _ in rows
                  if "MARKER" in category and b > a]
        if not ranges:
            return ()
        api = [(int(tid), int(a), int(c)) for a, _b, tid, category, _, c in rows
               if category.startswith("HIP") and c >= 0]
        gpu_ns: dict[int, int] = {}
        for table in ("rocpd_kernel_dispatch", "rocpd_memory_copy"):
            if "event_id" not in rocpd._columns(db, table):
                continue
            activity, duration = rocpd._interval(db, table, "K" if table.endswith("dispatch") else "M")
            alias = "K" if table.endswith("dispatch") else "M"
            for c, d in db.execute(f"SELECT EV.correlation_id, {duration} FROM {activity} JOIN rocpd_event EV "
                                   f"ON EV.id = {alias}.event_id AND EV.guid = {alias}.guid "
                                   "WHERE EV.correlation_id IS NOT NULL"):
                gpu_ns[int(c)] = gpu_ns.get(int(c), 0) + int(d)
    except sqlite3.DatabaseError:
        return ()  # the tables stand without the annotations; rocpd's own reader reports a broken file
    finally:
        db.close()
    launches = Launches([t for t, _, _ in api], [a for _, a, _ in api], [c for _, _, c in api], gpu_ns) if api else None
    return annotation_rows(rank, ranges, launches)
