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
from profilectl.formats.tables import PER_DISPATCH, AnnotationRow, KernelStats, StatsByName, Tables, merge_all

if TYPE_CHECKING:
    from profilectl.analysis.timeline import RankTimeline

SQLITE_MAGIC = b"SQLite format 3\x00"
EXPORT_TIMEOUT_S = 1800.0  # a report of millions of events takes minutes to export
MEMSET = "Memset"


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
    marks = {schema()[k] for k in ("kernels", "api", "nvtx", "gpus")} | set(schema()["renamed"]["metadata"])
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
    nsys = nsys or shutil.which("nsys")
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


def _duration(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return f'({prefix}"end" - {prefix}start)'


def _aggregates(duration: str) -> str:
    return f"count(*), sum({duration}), sum(CAST({duration} AS REAL) * {duration}), min({duration}), max({duration})"


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

    def kernels(self) -> dict[int, StatsByName]:
        if not self.has("kernels"):
            return {}
        name = "demangledName" if "demangledName" in _columns(self.db, self.facts["kernels"]) else "shortName"
        out: dict[int, StatsByName] = {}
        rows = self.db.execute(
            f"SELECT K.globalPid, S.value, {_aggregates(_duration('K'))} FROM {self.table('kernels')} K "
            f"JOIN {self.table('strings')} S ON S.id = K.{name} GROUP BY K.globalPid, K.{name}")
        for global_pid, kernel, *sums in rows:
            _add(out, _pid(global_pid), str(kernel), sums)
        return out

    def api(self) -> dict[int, StatsByName]:
        """CUDA runtime and driver calls, named as `nsys stats` shows them (no `_v3020` suffix)."""
        if not self.has("api"):
            return {}
        suffix = re.compile(self.facts["api_version_suffix"])
        shift = int(self.facts["pid_shift"])
        out: dict[int, StatsByName] = {}
        rows = self.db.execute(
            f"SELECT (R.globalTid >> {shift}) << {shift}, S.value, {_aggregates(_duration('R'))} "
            f"FROM {self.table('api')} R JOIN {self.table('strings')} S ON S.id = R.nameId "
            f"GROUP BY 1, R.nameId")
        for global_pid, call, *sums in rows:
            _add(out, _pid(global_pid), suffix.sub("", str(call)), sums)
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
            for global_pid, kind, *sums in self.db.execute(
                    f"SELECT globalPid, copyKind, {_aggregates(_duration())} FROM {self.table('copies')} "
                    "GROUP BY globalPid, copyKind"):
                _add(out, _pid(global_pid), f"Memcpy {labels.get(int(kind), f'kind {kind}')}", sums)
        if self.has("memsets"):
            for global_pid, *sums in self.db.execute(
                    f"SELECT globalPid, {_aggregates(_duration())} FROM {self.table('memsets')} "
                    "GROUP BY globalPid"):
                _add(out, _pid(global_pid), MEMSET, sums)
        return out

    # -------------------------------------------------------------- rows for the timeline and NVTX
    def gpu_rows(self) -> list[tuple[int, int, int, int, int, int, int, str]]:
        """(pid, start, end, device, stream, correlation, kind, name) of every kernel, copy, memset."""
        rows: list[tuple[int, int, int, int, int, int, int, str]] = []
        if self.has("kernels"):
            name = "demangledName" if "demangledName" in _columns(self.db, self.facts["kernels"]) else "shortName"
            for g, a, b, dev, stream, corr, kernel in self.db.execute(
                    f"SELECT K.globalPid, K.start, K.\"end\", K.deviceId, K.streamId, coalesce(K.correlationId, -1), "
                    f"S.value FROM {self.table('kernels')} K JOIN {self.table('strings')} S ON S.id = K.{name}"):
                rows.append((_pid(g), a, b, dev, stream, corr, 0, str(kernel)))
        if self.has("copies"):
            labels = self.copy_labels()
            for g, a, b, dev, stream, corr, kind in self.db.execute(
                    f"SELECT globalPid, start, \"end\", deviceId, streamId, coalesce(correlationId, -1), copyKind "
                    f"FROM {self.table('copies')}"):
                rows.append((_pid(g), a, b, dev, stream, corr, 1, f"Memcpy {labels.get(int(kind), f'kind {kind}')}"))
        if self.has("memsets"):
            for g, a, b, dev, stream, corr in self.db.execute(
                    f"SELECT globalPid, start, \"end\", deviceId, streamId, coalesce(correlationId, -1) "
                    f"FROM {self.table('memsets')}"):
                rows.append((_pid(g), a, b, dev, stream, corr, 1, MEMSET))
        return rows

    def api_rows(self) -> list[tuple[int, int, int, int, int]]:
        """(pid, globalTid, start, end, correlation) of every CUDA API call."""
        if not self.has("api"):
            return []
        return [(_pid(t), int(t), a, b, corr) for t, a, b, corr in self.db.execute(
            f"SELECT globalTid, start, \"end\", coalesce(correlationId, -1) FROM {self.table('api')}")]

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
        return [(_pid(t), int(t or 0), a, b, str(name if name is not None else "<unnamed NVTX range>"),
                 kind == push_pop) for t, a, b, name, kind in rows]

    def close(self) -> None:
        self.db.close()


def _annotations(rank: str, ranges: list[tuple[int, int, int, int, str, bool]],
                 api: list[tuple[int, int, int, int, int]], gpu_ns_of: dict[int, int]) -> tuple[AnnotationRow, ...]:
    """NVTX ranges of one process as the annotations table: calls, total, self (push/pop ranges
    nested on their thread: time not in a child range), GPU time of the kernels, copies and memsets
    launched by CUDA API calls that start inside the range on its thread (by correlation id)."""
    import numpy as np
    linked = bool(api) and bool(gpu_ns_of)
    # per thread: launch starts in order, and the cumulated GPU time they launched
    by_thread: dict[int, tuple[Any, Any]] = {}
    for tid in {t for _, t, *_ in api}:
        calls = sorted((a, gpu_ns_of.get(corr, 0)) for _, t, a, _, corr in api if t == tid)
        starts = np.array([c[0] for c in calls], dtype=np.int64)
        by_thread[tid] = (starts, np.concatenate([[0], np.cumsum([c[1] for c in calls], dtype=np.int64)]))
    child_ns = [0] * len(ranges)
    order = sorted(range(len(ranges)), key=lambda i: (ranges[i][1], ranges[i][2], -ranges[i][3]))
    stack: list[int] = []
    thread = None
    for i in order:
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
        gpu = 0
        if tid in by_thread:
            starts, cumulated = by_thread[tid]
            low, high = np.searchsorted(starts, start, "left"), np.searchsorted(starts, end, "left")
            gpu = int(cumulated[high] - cumulated[low])
        have = sums.setdefault(name, [0, 0, 0, 0, duration, duration])
        have[0] += 1
        have[1] += duration
        have[2] += duration - child_ns[i]
        have[3] += gpu
        have[4], have[5] = min(have[4], duration), max(have[5], duration)
    return tuple(AnnotationRow(rank=rank, name=name, calls=n, total_ns=total, self_ns=own,
                               gpu_ns=gpu if linked else None, min_ns=low, max_ns=high)
                 for name, (n, total, own, gpu, low, high) in sums.items())


def _timeline(rank: str, host: str | None, gpu: list[tuple[int, int, int, int, int, int, int, str]],
              api: list[tuple[int, int, int, int, int]], ranges: list[tuple[int, int, int, int, str, bool]]
              ) -> "RankTimeline | None":
    from profilectl.analysis.timeline import Marker, rank_timeline
    from profilectl.formats.rocprofv3 import STEP_NAME
    if not gpu:
        return None
    names: dict[str, int] = {}
    streams: dict[str, int] = {}
    return rank_timeline(
        rank, host, start=[g[1] for g in gpu], end=[g[2] for g in gpu],
        stream=[streams.setdefault(f"GPU {g[3]} stream {g[4]}", len(streams)) for g in gpu],
        kind=bytes(g[6] for g in gpu), name=[names.setdefault(g[7], len(names)) for g in gpu],
        correlation=[g[5] for g in gpu], names=list(names), streams=list(streams),
        api_start=[a[2] for a in api if a[4] >= 0], api_end=[a[3] for a in api if a[4] >= 0],
        api_correlation=[a[4] for a in api if a[4] >= 0],
        markers=[Marker(r[4], r[2], r[3], False) for r in ranges if r[3] > r[2] and STEP_NAME.match(r[4])])


def read_export(path: Path, rank_hint: str | None = None, host: str | None = None) -> Tables:
    """One SQLite export's tables; a process per rank row and timeline."""
    export = _Export(path)
    try:
        kernels, api, copies = export.kernels(), export.api(), export.copies()
        gpu, calls, ranges = export.gpu_rows(), export.api_rows(), export.nvtx_rows()
    except sqlite3.DatabaseError as exc:
        raise FormatError(f"{path}: not a readable Nsight Systems export ({exc})") from None
    finally:
        export.close()
    file_rank, file_host = ranks.identity(path)
    host = host or file_host
    pids = sorted(set(kernels) | set(api) | set(copies) | {r[0] for r in ranges})
    parts = []
    for pid in pids:
        rank = (rank_hint or file_rank) if len(pids) == 1 else f"pid {pid}"
        mine_gpu = [g for g in gpu if g[0] == pid]
        mine_api = [a for a in calls if a[0] == pid]
        mine_ranges = [r for r in ranges if r[0] == pid]
        gpu_ns_of: dict[int, int] = {}
        for g in mine_gpu:
            if g[5] >= 0:
                gpu_ns_of[g[5]] = gpu_ns_of.get(g[5], 0) + g[2] - g[1]
        process_kernels = kernels.get(pid, {})
        timeline = _timeline(rank, host, mine_gpu, mine_api, mine_ranges)
        parts.append(Tables(kernels=process_kernels, kernel_detail=PER_DISPATCH if process_kernels else 0,
                            api=api.get(pid, {}), memory_copies=copies.get(pid, {}),
                            annotations=_annotations(rank, mine_ranges, mine_api, gpu_ns_of),
                            ranks=(ranks.rank_row(rank, host, process_kernels),),
                            timelines=(timeline,) if timeline is not None else ()))
    tables = merge_all(parts)
    if not kernels:
        why = "the report was made without CUDA tracing (-t cuda), or the program launched no kernel"
        tables = tables.merge(Tables(notes=(f"{path.name} holds no CUDA kernel ({why}); no GPU timeline",)))
    return tables


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
