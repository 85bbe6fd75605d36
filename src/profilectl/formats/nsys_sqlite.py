"""Nsight Systems reports: the SQLite export (`nsys export --type sqlite`) read directly, and
`.nsys-rep` reports (`.qdrep` before 2021.4) exported through `nsys export` first where nsys is
installed. Into the same tables as every other tool: kernels, CUDA API calls, copies and memsets
(aggregated inside SQLite, GROUP BY over the activity tables joined with StringIds), NVTX ranges as
the annotations table, and one timeline per process.

Table and column names, renames and id layouts are data (profiling/tools/nsys.yaml `schema`, with
their sources). A report holds every process nsys followed: each process is its own rank row and
timeline; a file named by profilectl's per-rank template (`<host>-rank<R>-<pid>`) names its rank.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from profilectl import data
from profilectl.errors import FormatError, UnavailableError
from profilectl.formats import ranks
from profilectl.formats.reader import Reader, each_file, first_bytes
from profilectl.model.tables import PER_DISPATCH, AnnotationRow, KernelStats, StatsByName, Tables, merge_all
from profilectl.model.timeline import sorted_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from profilectl.model.timeline import HostActivity, RankTimeline

SQLITE_MAGIC = b"SQLite format 3\x00"
EXPORT_TIMEOUT_S = 1800.0  # a report of millions of events takes minutes to export
MEMSET = "Memset"
MEMSET_KEY = -1_000_000  # a memset's name key among the StringIds ids (>= 0) and the copy kinds (-1 - kind)
GPU_COLUMNS = ("global_pid", "start", "end", "device", "stream", "correlation", "kind", "key")
FETCH_ROWS = 1 << 16  # rows per fetch: Python objects for one batch at a time


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/nsys.yaml")


def schema() -> dict[str, Any]:
    return tool_facts()["schema"]


def report_suffixes() -> tuple[str, ...]:
    facts = tool_facts()
    return (str(facts["report_suffix"]), *(str(s) for s in facts.get("old_report_suffixes") or ()))


# ------------------------------------------------------------------ recognising
def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise FormatError(f"{path}: cannot open as SQLite ({exc})") from None


def _table_names(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def is_nsys_sqlite(path: Path) -> bool:
    """An Nsight Systems export: StringIds with nsys's activity, NVTX or target-info tables (rocpd
    databases hold rocpd_* tables and no StringIds)."""
    if first_bytes(path, 16) != SQLITE_MAGIC:
        return False
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = _table_names(db)
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return False
    marks = {schema()[k] for k in ("kernels", "api", "nvtx", "gpus", "osrt")} | set(schema()["renamed"]["metadata"])
    return schema()["strings"] in names and bool(names & marks)


def export_version(path: Path) -> str | None:
    """The Nsight Systems release that wrote the export (its metadata table, under either name)."""
    db = _connect(path)
    try:
        names = _table_names(db)
        for table in schema()["renamed"]["metadata"]:
            if table in names:
                row = db.execute(f"SELECT value FROM `{table}` WHERE name = 'EXPORT_PRODUCT_VERSION'").fetchone()
                return str(row[0]) if row else None
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return None


# ------------------------------------------------------------------ .nsys-rep -> .sqlite
def find_nsys() -> str | None:
    """nsys on PATH, else where Nsight Systems installs itself (nsys.yaml `install_paths`, newest
    release folder first): the probe looks there too, so a run traced by it is read by it."""
    import glob
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in tool_facts().get("install_paths") or ():
        for candidate in sorted(glob.glob(str(pattern)), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def export_argv(nsys: str, report: Path, output: Path) -> list[str]:
    return [nsys, *tool_facts()["export"]["argv"], str(output), str(report)]


def exported(report: Path, into: Path, nsys: str | None = None) -> tuple[Path, list[str] | None]:
    """The SQLite export of a report: the one beside it when it is current (a profilectl run
    exports each report after profiling), else made by `nsys export --type sqlite` into `into` (never
    beside the user's files). Returns (the export, the argv that made it or None); nsys missing is a
    one-line UnavailableError saying what to do."""
    beside = report.with_suffix(".sqlite")
    try:
        if beside.is_file() and beside.stat().st_mtime >= report.stat().st_mtime and is_nsys_sqlite(beside):
            return beside, None
    except OSError:
        pass
    nsys = nsys or find_nsys()
    if nsys is None:
        raise UnavailableError(
            f"{report}: a .nsys-rep report is read through `nsys export --type sqlite` and nsys is not on PATH: "
            f"add Nsight Systems' bin folder to PATH, or export it where nsys is (nsys export --type sqlite "
            f"--output {beside.name} {report.name}) and read the .sqlite")
    output = into / f"{len(list(into.iterdir()))}-{beside.name}"
    argv = export_argv(nsys, report, output)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise FormatError(f"{report}: nsys export took more than {EXPORT_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise UnavailableError(f"{report}: could not start {nsys} ({exc.strerror})") from None
    if done.returncode != 0 or not output.is_file():
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        why = lines[-1] if lines else f"exit code {done.returncode}, no {output.name} written"
        raise FormatError(f"{report}: nsys export --type sqlite failed: {why}")
    return output, argv


# ------------------------------------------------------------------ reading an export
def _pid(global_id: int | None) -> int:
    """The process id inside a serialized globalPid/globalTid (nsys.yaml schema pid_shift/pid_mask)."""
    if global_id is None:
        return -1
    return (int(global_id) >> int(schema()["pid_shift"])) & int(schema()["pid_mask"])


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info(`{table}`)")}


def _int_rows(path: Path, db: sqlite3.Connection, query: str) -> "NDArray[np.int64]":
    """A query's integer columns as one int64 array (rows x columns): through Arrow (connectorx)
    where installed, else sqlite3 in batches (formats/rocpd.py's column reader, the same values)."""
    import numpy as np
    from profilectl.formats.rocpd import int_batches
    width = len(db.execute(f"SELECT * FROM ({query}) LIMIT 0").description)
    batches = [np.column_stack(columns) for columns in int_batches(path, db, query, width)]
    return np.concatenate(batches) if batches else np.zeros((0, width), dtype=np.int64)


def _pids(global_ids: "NDArray[np.int64]") -> "NDArray[np.int64]":
    return (global_ids >> int(schema()["pid_shift"])) & int(schema()["pid_mask"])


def _add(into: dict[int, StatsByName], pid: int, name: str, row: Iterable[Any]) -> None:
    n, total, total_sq, low, high = row
    stats = KernelStats.from_sums(int(n), float(total), float(total_sq), float(low), float(high))
    into.setdefault(pid, {}).setdefault(name, KernelStats()).merge(stats)


class _Export:
    """One export's tables, per process (pid)."""

    def __init__(self, path: Path):
        self.path = path
        self.db = _connect(path)
        try:
            self.tables = _table_names(self.db)
        except sqlite3.DatabaseError as exc:
            raise FormatError(f"{path}: not a readable Nsight Systems export ({exc})") from None
        self.facts = schema()

    def has(self, key: str) -> bool:
        return self.facts[key] in self.tables

    def table(self, key: str) -> str:
        return f"`{self.facts[key]}`"

    def grouped(self, key: str, alias: str, by: str) -> list[tuple[Any, ...]]:
        """(by..., count, sum, sum of squares, min, max) of a table's intervals: SQLite's GROUP BY on
        ids alone, cut into rowid ranges read side by side (formats/rocpd.py's grouping: the
        activity tables have start/end like rocpd's), the names looked up after."""
        from profilectl.formats.rocpd import _grouped
        return _grouped(self.path, self.facts[key], alias, by)

    def strings(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted({int(i) for i in ids})
        found: dict[int, str] = {}
        for at in range(0, len(wanted), 500):
            chunk = wanted[at:at + 500]
            found.update({int(i): str(v) for i, v in self.db.execute(
                f"SELECT id, value FROM {self.table('strings')} WHERE id IN ({','.join('?' * len(chunk))})", chunk)})
        return found

    def kernels(self) -> dict[int, StatsByName]:
        if not self.has("kernels"):
            return {}
        name = "demangledName" if "demangledName" in _columns(self.db, self.facts["kernels"]) else "shortName"
        rows = self.grouped("kernels", "K", f"K.globalPid, K.{name}")
        names = self.strings(row[1] for row in rows)
        out: dict[int, StatsByName] = {}
        for global_pid, kernel, *sums in rows:
            _add(out, _pid(global_pid), names.get(int(kernel), f"<string {kernel}>"), sums)
        return out

    def api(self) -> dict[int, StatsByName]:
        """CUDA runtime and driver calls, named as `nsys stats` shows them (no `_v3020` suffix)."""
        if not self.has("api"):
            return {}
        suffix = re.compile(self.facts["api_version_suffix"])
        rows = self.grouped("api", "R", "R.globalTid, R.nameId")  # a process's threads merge below
        names = self.strings(row[1] for row in rows)
        out: dict[int, StatsByName] = {}
        for global_tid, call, *sums in rows:
            _add(out, _pid(global_tid), suffix.sub("", names.get(int(call), f"<string {call}>")), sums)
        return out

    def copy_labels(self) -> dict[int, str]:
        labels = {int(k): str(v) for k, v in (self.facts["copy_kind_labels"] or {}).items()}
        if self.has("copy_kinds"):
            labels.update({int(i): str(label) for i, label in
                           self.db.execute(f"SELECT id, label FROM {self.table('copy_kinds')}")})
        return labels

    def copies(self) -> dict[int, StatsByName]:
        out: dict[int, StatsByName] = {}
        if self.has("copies"):
            labels = self.copy_labels()
            for global_pid, kind, *sums in self.grouped("copies", "M", "M.globalPid, M.copyKind"):
                _add(out, _pid(global_pid), f"Memcpy {labels.get(int(kind), f'kind {kind}')}", sums)
        if self.has("memsets"):
            for global_pid, *sums in self.grouped("memsets", "M", "M.globalPid"):
                _add(out, _pid(global_pid), MEMSET, sums)
        return out

    # -------------------------------------------------------------- columns for the timeline and NVTX
    def gpu_columns(self) -> tuple["NDArray[np.int64]", dict[int, str]]:
        """Every kernel, copy and memset as rows of int64 columns GPU_COLUMNS (never a Python
        object per row), and the names of their keys: a kernel's StringIds id, a copy's -1 - copyKind,
        a memset's MEMSET_KEY."""
        import numpy as np
        parts, names = [], {}
        common = 'globalPid, start, "end", deviceId, streamId, coalesce(correlationId, -1)'
        if self.has("kernels"):
            name = "demangledName" if "demangledName" in _columns(self.db, self.facts["kernels"]) else "shortName"
            parts.append(_int_rows(self.path, self.db, f"SELECT {common}, 0, {name} FROM {self.table('kernels')}"))
        if self.has("copies"):
            parts.append(_int_rows(self.path, self.db, f"SELECT {common}, 1, -1 - copyKind FROM {self.table('copies')}"))
            names.update({-1 - kind: f"Memcpy {label}" for kind, label in self.copy_labels().items()})
        if self.has("memsets"):
            parts.append(_int_rows(self.path, self.db, f"SELECT {common}, 1, {MEMSET_KEY} FROM {self.table('memsets')}"))
            names[MEMSET_KEY] = MEMSET
        rows = np.concatenate(parts) if parts else np.zeros((0, len(GPU_COLUMNS)), dtype=np.int64)
        rows = _by_start(rows, GPU_COLUMNS.index("start"))  # exports may list rows out of time order (2025.6)
        keys = sorted_distinct(rows[:, GPU_COLUMNS.index("key")]).tolist()
        names.update(self.strings(k for k in keys if k >= 0))
        for k in keys:
            names.setdefault(int(k), f"Memcpy kind {-1 - k}" if k < 0 else f"<string {k}>")
        return rows, names

    def api_columns(self) -> "NDArray[np.int64]":
        """Every CUDA API call: globalTid, start, end, correlation id, name (StringIds id), in start
        order (Nsight Systems 2025.6 notes that exported rows may come in any order)."""
        import numpy as np
        if not self.has("api"):
            return np.zeros((0, 5), dtype=np.int64)
        return _by_start(_int_rows(self.path, self.db, f'SELECT coalesce(globalTid, 0), start, "end", '
                                   f"coalesce(correlationId, -1), nameId FROM {self.table('api')}"), 1)

    def osrt_columns(self) -> "NDArray[np.int64]":
        """Every OS runtime call (-t osrt): globalTid, start, end, name (StringIds id), in start order."""
        import numpy as np
        if not self.has("osrt"):
            return np.zeros((0, 4), dtype=np.int64)
        return _by_start(_int_rows(self.path, self.db, f'SELECT coalesce(globalTid, 0), start, "end", nameId '
                                   f"FROM {self.table('osrt')}"), 1)

    def osrt(self) -> dict[int, StatsByName]:
        """OS runtime calls per process and name, as the API table of an export that holds no CUDA API."""
        if not self.has("osrt"):
            return {}
        rows = self.grouped("osrt", "O", "O.globalTid, O.nameId")
        names = self.strings(row[1] for row in rows)
        out: dict[int, StatsByName] = {}
        for global_tid, call, *sums in rows:
            _add(out, _pid(global_tid), names.get(int(call), f"<string {call}>"), sums)
        return out

    def programs(self, pids: Iterable[int]) -> dict[int, str]:
        """What each process is, for the wording of host-gap advice (RankTimeline.program): "python"
        where its name says so, else "native" (a CUDA program of its own), by PROCESSES."""
        wanted = sorted(set(pids))
        if not self.has("processes") or not wanted:
            return {}
        rows = self.db.execute(f"SELECT pid, name FROM {self.table('processes')} "
                               f"WHERE pid IN ({','.join('?' * len(wanted))})", wanted).fetchall()
        return {int(pid): "python" if "python" in str(name).lower() else "native" for pid, name in rows if name}

    def cpu_samples(self) -> int:
        if not self.has("cpu_samples"):
            return 0
        return int(self.db.execute(f"SELECT count(*) FROM {self.table('cpu_samples')}").fetchone()[0])

    def nvtx_rows(self) -> list[tuple[int, int, int, int, str, bool]]:
        """(pid, globalTid, start, end, name, nested) of every NVTX range that ended; `nested`: a
        push/pop range (thread-nested), else a start/end range (may cross threads, never nested)."""
        if not self.has("nvtx"):
            return []
        types = {str(k): int(v) for k, v in self.facts["nvtx_range_types"].items()}
        if self.has("event_types"):
            known = {str(n): int(i) for i, n in self.db.execute(f"SELECT id, name FROM {self.table('event_types')}")}
            types = {name: known.get(name, number) for name, number in types.items()}
        columns = _columns(self.db, self.facts["nvtx"])
        text = "N.text"
        source = f"{self.table('nvtx')} N"
        if "textId" in columns:
            source += f" LEFT JOIN {self.table('strings')} S ON S.id = N.textId"
            text = "coalesce(N.text, S.value)" if "text" in columns else "S.value"
        push_pop = types["NvtxPushPopRange"]
        rows = self.db.execute(
            f"SELECT N.globalTid, N.start, N.\"end\", {text}, N.eventType FROM {source} "
            f"WHERE N.eventType IN (?, ?) AND N.\"end\" IS NOT NULL AND N.\"end\" >= N.start",
            (push_pop, types["NvtxStartEndRange"]))
        return sorted(((_pid(t), int(t or 0), a, b, str(name if name is not None else "<unnamed NVTX range>"),
                        kind == push_pop) for t, a, b, name, kind in rows), key=lambda r: (r[2], -r[3]))

    def close(self) -> None:
        self.db.close()


def _by_start(rows: "NDArray[np.int64]", column: int) -> "NDArray[np.int64]":
    """Rows in time order (a stable sort; no copy where they already are)."""
    import numpy as np
    if len(rows) < 2 or bool((np.diff(rows[:, column]) >= 0).all()):
        return rows
    return rows[np.argsort(rows[:, column], kind="stable")]


def _host_activity(api: "NDArray[np.int64]", osrt: "NDArray[np.int64]",
                   ranges: list[tuple[int, int, int, int, str, bool]], names: dict[int, str]) -> "HostActivity | None":
    """What one process's host did, for the idle-time diagnosis and `report --range NAME`
    (analysis/timeline.py HostActivity): its CUDA API calls (runtime), its OS runtime calls (host
    work: the program's own blocking and I/O), its NVTX ranges (annotations)."""
    import numpy as np
    from profilectl.model.timeline import HOST_ANNOTATION, HOST_OPERATOR, HOST_RUNTIME, HostActivity
    if not len(api) and not len(osrt) and not ranges:
        return None
    suffix = re.compile(schema()["api_version_suffix"])
    labels: dict[str, int] = {}
    threads: dict[int, int] = {}

    def ids(keys: Iterable[int]) -> list[int]:
        return [labels.setdefault(suffix.sub("", names.get(int(k), f"<string {k}>")), len(labels)) for k in keys]
    name = ids(api[:, 4].tolist()) + ids(osrt[:, 3].tolist()) + \
        [labels.setdefault(r[4], len(labels)) for r in ranges]
    tids = api[:, 0].tolist() + osrt[:, 0].tolist() + [r[1] for r in ranges]
    return HostActivity(
        start=np.concatenate([api[:, 1], osrt[:, 1], np.asarray([r[2] for r in ranges], dtype=np.int64)]),
        end=np.concatenate([api[:, 2], osrt[:, 2], np.asarray([r[3] for r in ranges], dtype=np.int64)]),
        category=np.asarray([HOST_RUNTIME] * len(api) + [HOST_OPERATOR] * len(osrt) + [HOST_ANNOTATION] * len(ranges),
                            dtype=np.int8),
        name=np.asarray(name, dtype=np.int64),
        thread=np.asarray([threads.setdefault(t, len(threads)) for t in tids], dtype=np.int64),
        names=tuple(labels), threads=tuple(str(t) for t in threads))


def _annotations(rank: str, ranges: list[tuple[int, int, int, int, str, bool]], api: "NDArray[np.int64]",
                 gpu: "NDArray[np.int64]") -> tuple[AnnotationRow, ...]:
    """NVTX ranges of one process as the annotations table: calls, total, self (push/pop ranges
    nested on their thread: time not in a child range), GPU time of the kernels, copies and memsets
    launched by CUDA API calls that start inside the range on its thread (by correlation id)."""
    import numpy as np
    col = GPU_COLUMNS.index
    correlation = gpu[:, col("correlation")]
    linked = bool(len(api)) and bool((correlation >= 0).any())
    # each call's GPU time: the durations of the activity carrying its correlation id, added up
    ids, inverse = np.unique(correlation, return_inverse=True)
    per_id = np.bincount(inverse.reshape(-1), weights=gpu[:, col("end")] - gpu[:, col("start")],
                         minlength=len(ids)).astype(np.int64)
    call_gpu = np.zeros(len(api), dtype=np.int64)
    if len(ids):
        at = np.clip(np.searchsorted(ids, api[:, 3]), 0, len(ids) - 1)
        hit = (ids[at] == api[:, 3]) & (api[:, 3] >= 0)
        call_gpu[hit] = per_id[at[hit]]
    by_thread: dict[int, tuple[Any, Any]] = {}
    for tid in sorted_distinct(api[:, 0]).tolist() if len(ranges) else []:
        mine = api[:, 0] == tid
        order = np.argsort(api[mine, 1], kind="stable")
        by_thread[tid] = (api[mine, 1][order], np.concatenate([[0], np.cumsum(call_gpu[mine][order])]))
    child_ns = [0] * len(ranges)
    stack: list[int] = []
    thread = None
    for i in sorted(range(len(ranges)), key=lambda i: (ranges[i][1], ranges[i][2], -ranges[i][3])):
        _, tid, start, end, _, nested = ranges[i]
        if not nested:
            continue
        if tid != thread:
            stack, thread = [], tid
        while stack and ranges[stack[-1]][3] <= start:
            stack.pop()
        if stack:
            child_ns[stack[-1]] += end - start
        stack.append(i)
    sums: dict[str, list[int]] = {}
    for i, (_, tid, start, end, name, _) in enumerate(ranges):
        duration = end - start
        gpu_ns = 0
        if tid in by_thread:
            starts, cumulated = by_thread[tid]
            low, high = np.searchsorted(starts, start, "left"), np.searchsorted(starts, end, "left")
            gpu_ns = int(cumulated[high] - cumulated[low])
        have = sums.setdefault(name, [0, 0, 0, 0, duration, duration])
        have[0] += 1
        have[1] += duration
        have[2] += duration - child_ns[i]
        have[3] += gpu_ns
        have[4], have[5] = min(have[4], duration), max(have[5], duration)
    return tuple(AnnotationRow(rank=rank, name=name, calls=n, total_ns=total, self_ns=own,
                               gpu_ns=gpu_ns if linked else None, min_ns=low, max_ns=high)
                 for name, (n, total, own, gpu_ns, low, high) in sums.items())


def _timeline(rank: str, host: str | None, gpu: "NDArray[np.int64]", names: dict[int, str], api: "NDArray[np.int64]",
              ranges: list[tuple[int, int, int, int, str, bool]], activity: "HostActivity | None" = None,
              program: str = "") -> "RankTimeline | None":
    """One process's kernels, copies and memsets (numpy columns, no Python object per row), its
    launch calls and its step ranges (ProfilerStep#N and the like, from NVTX)."""
    import numpy as np
    from profilectl.model.timeline import Marker, rank_timeline
    from profilectl.model.timeline import STEP_NAME
    if not len(gpu):
        return None
    col = GPU_COLUMNS.index
    keys, name_index = np.unique(gpu[:, col("key")], return_inverse=True)
    stream_keys = (gpu[:, col("device")] << 32) | (gpu[:, col("stream")] & 0xFFFFFFFF)
    streams, stream_index = np.unique(stream_keys, return_inverse=True)
    linked = api[:, 3] >= 0
    return rank_timeline(
        rank, host, start=gpu[:, col("start")], end=gpu[:, col("end")], stream=stream_index.reshape(-1).astype(np.int32),
        kind=gpu[:, col("kind")].astype(np.int8), name=name_index.reshape(-1).astype(np.int32),
        correlation=gpu[:, col("correlation")], names=[names[int(k)] for k in keys.tolist()],
        streams=[f"GPU {int(k) >> 32} stream {int(k) & 0xFFFFFFFF}" for k in streams.tolist()],
        api_start=api[linked, 1], api_end=api[linked, 2], api_correlation=api[linked, 3],
        markers=[Marker(r[4], r[2], r[3], False) for r in ranges if r[3] > r[2] and STEP_NAME.match(r[4])],
        host_activity=activity, program=program)


def read_export(path: Path, rank_hint: str | None = None, host: str | None = None) -> Tables:
    """One SQLite export's tables; a process per rank row and timeline."""
    export = _Export(path)
    try:
        kernels, api, copies = export.kernels(), export.api(), export.copies()
        (gpu, names), calls, ranges = export.gpu_columns(), export.api_columns(), export.nvtx_rows()
        osrt = export.osrt_columns()
        # the API table is the CUDA API; an export without any (no -t cuda, or no CUDA program) shows its OS calls
        os_calls = export.osrt() if not api and not kernels else {}
        samples = export.cpu_samples()
        programs = export.programs([*kernels, *api, *copies, *os_calls, *(r[0] for r in ranges)])
        names.update(export.strings([*calls[:, 4].tolist(), *osrt[:, 3].tolist()]))
    except sqlite3.DatabaseError as exc:
        raise FormatError(f"{path}: not a readable Nsight Systems export ({exc})") from None
    except Exception as exc:  # connectorx's own errors: a file SQLite itself cannot read either
        if type(exc).__module__.split(".")[0] not in ("connectorx", "pyarrow"):
            raise
        raise FormatError(f"{path}: not a readable Nsight Systems export ({exc})") from None
    finally:
        export.close()
    file_rank, file_host = ranks.identity(path)
    host = host or file_host
    gpu_pid, call_pid, osrt_pid = _pids(gpu[:, GPU_COLUMNS.index("global_pid")]), _pids(calls[:, 0]), _pids(osrt[:, 0])
    pids = sorted(set(kernels) | set(api) | set(copies) | set(os_calls) | {r[0] for r in ranges})
    parts = []
    for pid in pids:
        rank = (rank_hint or file_rank) if len(pids) == 1 else f"pid {pid}"
        mine_gpu, mine_api = gpu[gpu_pid == pid], calls[call_pid == pid]
        mine_ranges = [r for r in ranges if r[0] == pid]
        process_kernels = kernels.get(pid, {})
        timeline = _timeline(rank, host, mine_gpu, names, mine_api, mine_ranges,
                             _host_activity(mine_api, osrt[osrt_pid == pid], mine_ranges, names), programs.get(pid, ""))
        parts.append(Tables(kernels=process_kernels, kernel_detail=PER_DISPATCH if process_kernels else 0,
                            api=api.get(pid, {}) or os_calls.get(pid, {}), memory_copies=copies.get(pid, {}),
                            annotations=_annotations(rank, mine_ranges, mine_api, mine_gpu),
                            ranks=(ranks.rank_row(rank, host, process_kernels),),
                            timelines=(timeline,) if timeline is not None else ()))
    tables = merge_all(parts)
    notes = []
    if not kernels:
        why = "the report was made without CUDA tracing (-t cuda), or the program launched no kernel"
        notes.append(f"{path.name} holds no CUDA kernel ({why}); no GPU timeline")
    if os_calls:
        notes.append(f"{path.name} holds no CUDA API call: its API table is the OS runtime calls it holds (-t osrt, "
                     f"{sum(s.calls for by_name in os_calls.values() for s in by_name.values())} calls)")
    if samples:
        notes.append(f"{path.name} holds {samples} CPU samples (--sample): not read (no CPU profile here; "
                     "nsys stats --report cpu_samples or the Nsight Systems GUI shows them)")
    return tables.merge(Tables(notes=tuple(notes))) if notes else tables


class NsysReader(Reader):
    """Nsight Systems: `.nsys-rep` (`.qdrep`) reports and their SQLite exports. A report with a
    current export beside it is read once, from the export."""
    kind = "nsys"

    def recognises(self, path: Path) -> bool:
        if path.suffix in report_suffixes():
            return True
        return path.suffix in (".sqlite", ".db", ".sqlite3") and is_nsys_sqlite(path)

    def read(self, files: list[Path]) -> Tables:
        exports = {f.with_suffix("") for f in files if f.suffix not in report_suffixes()}
        reports = [f for f in files if f.suffix in report_suffixes() and f.with_suffix("") not in exports]
        named_by = {f: f for f in files if f.suffix not in report_suffixes()}  # export -> the file naming its rank
        notes = []
        with tempfile.TemporaryDirectory(prefix="profilectl-nsys-") as scratch:
            for report in reports:
                export, argv = exported(report, Path(scratch))
                if argv is not None:
                    shown = " ".join([Path(argv[0]).name, *argv[1:-2], "<export>", report.name])
                    notes.append(f"{report.name} read through `{shown}`")
                named_by[export] = report

            def read_one(path: Path) -> Tables:
                return read_export(path, *ranks.identity(named_by[path]))
            tables = merge_all(each_file(read_one, list(named_by)))
        return tables.merge(Tables(notes=tuple(notes)))
