"""ROCTx ranges (rocprofv3 --marker-trace, `<pid>_marker_api_trace.csv`) as user annotations: the
same table as torch's record_function ranges (model/tables.py AnnotationRow).

rocprofv3 writes one row per range: roctxRangePush/Pop and roctxRangeStart/Stop rows carry the
message in `Function`, the range's start and end, and the thread (`Thread_Id`; 0 for a
Start/Stop range, which belongs to the process, not to a thread: rocprofiler-sdk's documented
sample, fixtures/rocprofv3-docs/marker_api_trace.csv; its ROCTx guide, using-rocprofiler-sdk-roctx.rst:
"Start and End ... can start and end on different threads"). A roctxMark is a row whose start equals its
end: an instant, not a range, and left out of the table.

Per rank and name: calls, total, self (total less the ranges nested directly inside it on its
thread) and the GPU time of the kernels and copies whose launch call (HIP API trace, linked by
Correlation_Id in the CSV files, by rocpd_event.stack_id in a rocpd database) began inside the range
on its thread; None where the run traced no HIP API call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from profilectl.formats import polars_csv
from profilectl.model.tables import AnnotationRow

PROCESS_THREAD = 0  # Thread_Id of a roctxRangeStart/Stop range: the whole process


@dataclass(frozen=True)
class Range:
    """One ROCTx range of a marker_api_trace file: its message, its thread (0: the process) and its start and end."""
    name: str
    thread: int
    start: int
    end: int


def ranges_of(paths: Iterable[Path]) -> list[Range]:
    """The ranges (not the instant marks) of marker_api_trace files."""
    found = []
    for path in paths:
        cols = polars_csv.named_columns(path, ("Function",), ("Thread_Id", "Start_Timestamp", "End_Timestamp"), optional=("Thread_Id",))
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
    thread: list[int] = []
    start: list[int] = []
    correlation: list[int] = []
    for path in api_paths:
        cols = polars_csv.named_columns(path, (), ("Thread_Id", "Start_Timestamp", "Correlation_Id"))
        thread += cols["Thread_Id"]
        start += cols["Start_Timestamp"]
        correlation += cols["Correlation_Id"]
    gpu_ns: dict[int, int] = {}
    for path in activity_paths:
        cols = polars_csv.named_columns(path, (), ("Start_Timestamp", "End_Timestamp", "Correlation_Id"))
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


# In a rocpd database (formats/rocpd.py reads the rows) a ROCTx start/stop range is named after
# this operation: it belongs to the process, not a thread.
PROCESS_RANGE = "roctxProcessRangeA"


