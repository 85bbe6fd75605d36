"""A rank's partial: everything a job report needs of one rank, made where the rank ran, so that the
job's report merges small files instead of re-reading every rank's raw trace.

A partial holds the rank's name statistics (kernels, API calls, copies, operators) as columns of
running aggregates (count, total, mean, M2, min, max: Chan et al.'s merge is exact, the same
KernelStats.merge the raw read uses), its annotations, counters and rank row, and its timeline
reduced (analysis/reduce.py: the timeline row, gaps, busy blocks, steps, idle breakdown and the
waits per steady step that the straggler is judged from). No percentile of a kernel, operator or
annotation is reported, so no quantile sketch is kept.

Format: JSON, columnar inside (one array per statistic; busy blocks as base64 of little-endian
int64), written and read by msgspec where it is installed and by the standard library where it is
not (the compose images and the SLURM test cluster's nodes have no msgspec: their partials must
still be read on a machine that has it, and the other way round). bench/cluster_scale.py --formats
measures it against MessagePack, Parquet and Arrow IPC. Each partial carries a schema version, who
made it where and when, and the identity of every raw file it was made from: relative path, size,
mtime and a SHA-256 of its content. A partial whose files differ in any of these is stale and is
rebuilt: a file rewritten with its size and mtime put back is caught by its content. The content is
hashed again only where the file's (device, inode, ctime) changed since the partial was made (no
one can set a ctime back: a file whose ctime is the same was not written since), so the usual
report reads no raw file; copying a node's scratch back (`cp -a`: new inodes, same content) costs
one hash per file and no rebuild.

Reading one is bounded (files.read_regular): a partial.json that is a link, a fifo, a device or
larger than $PROFILECTL_MAX_PARTIAL_BYTES (default 4 GiB), or nested too deeply to decode, is one
line (PartialError) and the rank is rebuilt from its raw files or named, never a hang or a traceback.

Where: `<rank run dir>/partial.json`; where that folder is not writable, the cache folder
(read/cache.py's, under `partials/`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from profilectl import __version__
from profilectl.analysis.idle import RankIdle
from profilectl.analysis.reduce import RankReduction
from profilectl.analysis.stragglers import RankWaits
from profilectl.model.timeline import Gap, StepRow, TimelineRow
from profilectl.analysis.timeline import RankPiece
from profilectl.model.collectives import InspectorRecord
from profilectl.model.memory import MemoryReport
from profilectl.model.operators import OperatorShape
from profilectl.model.tables import (AnnotationRow, CollectiveCall, CounterValue, HookSteps, KernelStats, RankRow, Source,
                                       StatsByName, Tables, TraceClock)

if TYPE_CHECKING:
    from profilectl.jobs import JobRank

SCHEMA = 5  # bumped whenever the layout below changes: an older partial is rebuilt, never misread
# (2: collectives, clocks; 3: the content hash of each raw file; 5: operator shapes, memory history, inspector records)
FILE = "partial.json"
MAX_BYTES = 4 << 30  # $PROFILECTL_MAX_PARTIAL_BYTES: a partial.json larger than this is not read


def _finite(value: float) -> float | None:
    """JSON has no infinity (an empty minimum is +inf): None stands for it."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class FileIdentity:
    """One raw file a partial was made from, as it was then: path, size, mtime, content hash, device, inode, ctime."""
    path: str  # relative to the folder reduced
    size: int
    mtime_ns: int
    sha256: str = ""  # of the content read ("": not hashed: a stat of the files as they are now)
    # where the file was when hashed: the same (device, inode, ctime) means not written since
    device: int = 0
    inode: int = 0
    ctime_ns: int = 0


@dataclass(frozen=True)
class StatsColumns:
    """A StatsByName as columns, in the table's own order (ties in the report keep it)."""
    name: tuple[str, ...] = ()
    calls: tuple[int, ...] = ()
    total: tuple[float, ...] = ()
    mean: tuple[float, ...] = ()
    m2: tuple[float, ...] = ()
    minimum: tuple[float | None, ...] = ()  # None: +inf (no value)
    maximum: tuple[float | None, ...] = ()
    spread_known: tuple[bool, ...] = ()
    self_total: tuple[float | None, ...] = ()

    @classmethod
    def of(cls, stats: StatsByName) -> "StatsColumns":
        rows = list(stats.values())
        return cls(name=tuple(stats), calls=tuple(s.calls for s in rows), total=tuple(float(s.total) for s in rows),
                   mean=tuple(float(s.mean) for s in rows), m2=tuple(float(s.m2) for s in rows),
                   minimum=tuple(_finite(float(s.minimum)) for s in rows),
                   maximum=tuple(_finite(float(s.maximum)) for s in rows),
                   spread_known=tuple(s.spread_known for s in rows),
                   self_total=tuple(None if s.self_total is None else float(s.self_total) for s in rows))

    def stats(self) -> StatsByName:
        return {name: KernelStats(calls=c, total=t, mean=m, m2=v, minimum=math.inf if lo is None else lo,
                                  maximum=-math.inf if hi is None else hi, spread_known=k, self_total=st)
                for name, c, t, m, v, lo, hi, k, st in zip(self.name, self.calls, self.total, self.mean, self.m2,
                                                            self.minimum, self.maximum, self.spread_known,
                                                            self.self_total)}


@dataclass(frozen=True)
class CounterColumns:
    """CounterValue with its empty extremes (+inf, -inf) as None."""
    kernel: str
    counter: str
    total: float
    dispatches: int
    weighted: float
    weight: float
    timed: int
    minimum: float | None
    maximum: float | None
    unit: str

    @classmethod
    def of(cls, value: CounterValue) -> "CounterColumns":
        return cls(kernel=value.kernel, counter=value.counter, total=float(value.total), dispatches=value.dispatches,
                   weighted=float(value.weighted), weight=float(value.weight), timed=value.timed,
                   minimum=_finite(float(value.minimum)), maximum=_finite(float(value.maximum)), unit=value.unit)

    def value(self) -> CounterValue:
        return CounterValue(kernel=self.kernel, counter=self.counter, total=self.total, dispatches=self.dispatches,
                            weighted=self.weighted, weight=self.weight, timed=self.timed,
                            minimum=math.inf if self.minimum is None else self.minimum,
                            maximum=-math.inf if self.maximum is None else self.maximum, unit=self.unit)


@dataclass(frozen=True)
class PieceColumns:
    """A RankPiece as a partial stores it: its busy blocks as base64 of little-endian int64."""
    row: TimelineRow
    gaps: tuple[Gap, ...]
    block_start: str  # base64 of little-endian int64
    block_end: str
    steps: tuple[StepRow, ...]
    step_source: str


@dataclass(frozen=True)
class ReductionColumns:
    """A RankReduction as a partial stores it (its piece as PieceColumns)."""
    piece: PieceColumns
    idle: RankIdle
    waits: RankWaits | None


@dataclass(frozen=True)
class RankIdentity:
    """The rank as its job knows it (None for a bare folder)."""
    rank: int
    host: str
    run: str
    status: str
    exit_code: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class BareRank:
    """A rank of a bare profiler output (read/bare_partials.py): its key as the raw read names it,
    and where the raw read merges it (the reader's place, then the reader's own order of ranks)."""
    rank: str
    host: str | None
    order_reader: int
    order_place: str


@dataclass(frozen=True)
class Partial:
    """One rank's partial: its tables as columns, its timeline reduced, and who made it, when, from which files."""
    schema_version: int
    producer: str  # profilectl's version
    made_on: str  # host name
    made_at: str  # ISO 8601, UTC
    seconds: float  # to read the raw files and reduce them
    folder: str  # what was reduced, as the maker saw it
    files: tuple[FileIdentity, ...]
    rank: RankIdentity | None
    kernel_detail: int
    kernels: StatsColumns
    api: StatsColumns
    memory_copies: StatsColumns
    operators: StatsColumns
    annotations: tuple[AnnotationRow, ...]
    counters: tuple[CounterColumns, ...]
    timing_s: tuple[float, ...]
    step_ends_ns: tuple[tuple[int, ...], ...]
    ranks: tuple[RankRow, ...]
    trace_files: tuple[str, ...]
    sources: tuple[Source, ...]
    notes: tuple[str, ...]
    kernel_timing: str
    pc_samples: tuple[tuple[str, str, str, int], ...]
    stall_reasons: dict[str, int] = field(default_factory=dict)
    had_timelines: bool = False  # the files had timestamps (even if no GPU activity): the timeline is analysed
    reductions: tuple[ReductionColumns, ...] = ()
    bare: BareRank | None = None  # a rank of a bare folder, not of a job
    collectives: tuple[CollectiveCall, ...] = ()
    clocks: tuple[TraceClock, ...] = ()
    hook_steps: tuple[HookSteps, ...] = ()
    operator_shapes: tuple[OperatorShape, ...] = ()
    memory: tuple[MemoryReport, ...] = ()
    inspector: tuple[InspectorRecord, ...] = ()

    def tables(self) -> Tables:
        """The rank's Tables as the raw read gave them, less the timelines (they are `reductions`)."""
        return Tables(kernels=self.kernels.stats(), kernel_detail=self.kernel_detail, api=self.api.stats(),
                      memory_copies=self.memory_copies.stats(), operators=self.operators.stats(),
                      annotations=self.annotations, counters=tuple(c.value() for c in self.counters),
                      timing_s=self.timing_s, step_ends_ns=self.step_ends_ns, ranks=self.ranks,
                      trace_files=self.trace_files, sources=self.sources, notes=self.notes,
                      kernel_timing=self.kernel_timing, pc_samples={(k, i, s): n for k, i, s, n in self.pc_samples},
                      stall_reasons=dict(self.stall_reasons), collectives=self.collectives, clocks=self.clocks,
                      hook_steps=self.hook_steps, operator_shapes=self.operator_shapes,
                      memory=self.memory, inspector=self.inspector)

    def rank_reductions(self) -> tuple[RankReduction, ...]:
        import numpy as np
        out = []
        for r in self.reductions:
            p = r.piece
            blocks = (np.frombuffer(base64.b64decode(p.block_start), dtype="<i8").astype(np.int64),
                      np.frombuffer(base64.b64decode(p.block_end), dtype="<i8").astype(np.int64))
            out.append(RankReduction(piece=RankPiece(row=p.row, gaps=p.gaps, blocks=blocks, steps=p.steps,
                                                     step_source=p.step_source), idle=r.idle, waits=r.waits))
        return tuple(out)


@dataclass
class _Head:
    """The version alone, decoded first: a partial of another layout is rebuilt, never misread."""
    schema_version: int


class PartialError(Exception):
    """A partial that cannot be used: the reason, in one line."""


# ---------------------------------------------------------------- identity
def stat_identity(folder: Path, path: Path) -> FileIdentity:
    """A file's identity as stat sees it (no hash yet); OSError when it cannot be seen."""
    st = path.stat()
    return FileIdentity(path=path.relative_to(folder).as_posix(), size=st.st_size, mtime_ns=st.st_mtime_ns,
                        device=st.st_dev, inode=st.st_ino, ctime_ns=st.st_ctime_ns)


def identity(folder: Path) -> tuple[FileIdentity, ...]:
    """Every file under `folder` as stat sees it (relative path, size, mtime; not hashed), sorted;
    none when it is gone."""
    found = []
    try:
        files = [p for p in folder.rglob("*") if p.is_file()]
    except OSError:
        return ()
    for path in files:
        try:
            found.append(stat_identity(folder, path))
        except OSError:
            continue
    return tuple(sorted(found, key=lambda f: f.path))


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def hashed(folder: Path, files: tuple[FileIdentity, ...]) -> tuple[FileIdentity, ...]:
    """The identities with their contents' SHA-256 (hashed before the files are read: a file
    written meanwhile makes the partial stale next time, never fresh)."""
    return tuple(f if f.sha256 else dataclasses.replace(f, sha256=content_hash(folder / f.path)) for f in files)


def unchanged(stored: tuple[FileIdentity, ...], current: tuple[FileIdentity, ...], folder: Path) -> bool:
    """Whether the files a partial was made from (`stored`, hashed) are the files under `folder` now
    (`current`, as stat sees them): the same names, sizes and mtimes, and the same content, hashed
    again only where a file's (device, inode, ctime) is not the one it had when hashed."""
    if [(f.path, f.size, f.mtime_ns) for f in stored] != [(f.path, f.size, f.mtime_ns) for f in current]:
        return False
    for was, now in zip(stored, current):
        if not was.sha256:
            return False
        if (was.device, was.inode, was.ctime_ns) == (now.device, now.inode, now.ctime_ns):
            continue
        try:
            if content_hash(folder / now.path) != was.sha256:
                return False
        except OSError:
            return False
    return True


def rewitnessed(stored: tuple[FileIdentity, ...], current: tuple[FileIdentity, ...]) -> tuple[FileIdentity, ...] | None:
    """The stored identities (found unchanged) with the (device, inode, ctime) the files have now,
    where any differs (a folder copied back: each file hashed once, then known by stat again once the
    partial is stored with these); None where none differs."""
    if all((w.device, w.inode, w.ctime_ns) == (n.device, n.inode, n.ctime_ns) for w, n in zip(stored, current)):
        return None
    return tuple(dataclasses.replace(w, device=n.device, inode=n.inode, ctime_ns=n.ctime_ns)
                 for w, n in zip(stored, current))


# ---------------------------------------------------------------- making one
def make(folder: Path, rank: "JobRank | None" = None, files: tuple[FileIdentity, ...] | None = None) -> Partial:
    """Read `folder` (a rank's raw/) once and reduce it. The rank's row is the job's (its rank, host
    and status), as load_job's raw read makes it."""
    from profilectl.formats.registry import READERS
    from profilectl.formats.reader import read_path
    started = time.perf_counter()
    files = hashed(folder, identity(folder) if files is None else files)
    tables = read_path(folder, READERS, required=False) if files else Tables()
    if rank is not None:
        from profilectl.formats.ranks import rank_row
        row = dataclasses.replace(rank_row(str(rank.rank), rank.host, tables.kernels, tables.operators),
                                  status=rank.status)
        tables = dataclasses.replace(tables, ranks=(row,))
    return of_tables(tables, folder, files, rank, time.perf_counter() - started)


def of_tables(tables: Tables, folder: Path, files: tuple[FileIdentity, ...], rank: "JobRank | None" = None,
              seconds: float = 0.0) -> Partial:
    from profilectl.analysis.reduce import reduce_timelines
    reductions = reduce_timelines(tables.timelines) if tables.timelines else ()
    return Partial(
        schema_version=SCHEMA, producer=__version__, made_on=local_host(),
        made_at=datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        seconds=round(seconds + 0.0, 6), folder=str(folder), files=files,
        rank=None if rank is None else RankIdentity(rank=rank.rank, host=rank.host, run=rank.run, status=rank.status,
                                                    exit_code=rank.exit_code, message=rank.message),
        kernel_detail=tables.kernel_detail, kernels=StatsColumns.of(tables.kernels), api=StatsColumns.of(tables.api),
        memory_copies=StatsColumns.of(tables.memory_copies), operators=StatsColumns.of(tables.operators),
        annotations=tables.annotations, counters=tuple(CounterColumns.of(c) for c in tables.counters),
        timing_s=tables.timing_s,
        step_ends_ns=tables.step_ends_ns, ranks=tables.ranks, trace_files=tables.trace_files, sources=tables.sources,
        notes=tables.notes, kernel_timing=tables.kernel_timing,
        pc_samples=tuple((k, i, s, n) for (k, i, s), n in tables.pc_samples.items()),
        stall_reasons=dict(tables.stall_reasons), had_timelines=bool(tables.timelines),
        collectives=tables.collectives, clocks=tables.clocks, hook_steps=tables.hook_steps,
        operator_shapes=tables.operator_shapes, memory=tables.memory, inspector=tables.inspector,
        reductions=tuple(ReductionColumns(piece=PieceColumns(row=r.piece.row, gaps=r.piece.gaps,
                                                             block_start=_int64s(r.piece.blocks[0]),
                                                             block_end=_int64s(r.piece.blocks[1]),
                                                             steps=r.piece.steps, step_source=r.piece.step_source),
                                          idle=r.idle, waits=r.waits) for r in reductions))


def _int64s(values: Any) -> str:
    import numpy as np
    return base64.b64encode(np.asarray(values, dtype="<i8").tobytes()).decode("ascii")


# ---------------------------------------------------------------- files
def encode(partial: Partial) -> bytes:
    try:
        import msgspec
    except ImportError:
        return json.dumps(dataclasses.asdict(partial), allow_nan=False, separators=(",", ":")).encode()
    return msgspec.json.encode(partial)


_DECODERS: list[Any] = []
_DECODERS_MADE = threading.Lock()


def _decoders() -> tuple[Any, Any]:
    """msgspec's decoders of the head and the whole partial, made once, under a lock: msgspec builds
    a dataclass's type information at its first use, and two threads doing that at once crash the
    process (SIGSEGV in msgspec's extension: `report --on-cluster` reads each node's partials in a
    thread of its own). A decoder once made is safe to share between threads."""
    import msgspec
    with _DECODERS_MADE:
        if not _DECODERS:
            _DECODERS.extend((msgspec.json.Decoder(_Head).decode, msgspec.json.Decoder(Partial).decode))
    return _DECODERS[0], _DECODERS[1]


def decode(data: bytes, where: str = "partial") -> Partial:
    """The partial, or PartialError saying in one line why not (another schema, a torn or foreign
    file, nesting too deep to decode, too large for this machine's memory)."""
    try:
        import msgspec
    except ImportError:
        return _decode_stdlib(data, where)
    head, whole = _decoders()
    try:
        version = head(data).schema_version
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise PartialError(f"{where}: not a profilectl partial (unreadable or torn)") from None
    except MemoryError:
        raise PartialError(f"{where}: too large to decode in this machine's memory") from None
    if version != SCHEMA:
        raise PartialError(f"{where}: schema version {version}, this profilectl reads {SCHEMA}")
    try:
        return whole(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PartialError(f"{where}: damaged partial ({str(exc).splitlines()[0][:200]})") from None
    except RecursionError:
        raise PartialError(f"{where}: damaged partial (nested too deeply)") from None
    except MemoryError:
        raise PartialError(f"{where}: too large to decode in this machine's memory") from None


def _decode_stdlib(data: bytes, where: str) -> Partial:
    from profilectl.errors import FormatError
    from profilectl.files import load_typed
    try:
        plain = json.loads(data)
        version = plain["schema_version"]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise PartialError(f"{where}: not a profilectl partial (unreadable or torn)") from None
    except MemoryError:
        raise PartialError(f"{where}: too large to decode in this machine's memory") from None
    if version != SCHEMA:
        raise PartialError(f"{where}: schema version {version}, this profilectl reads {SCHEMA}")
    try:
        return load_typed(Partial, plain, where, "profilectl partial")
    except FormatError as exc:
        raise PartialError(f"{where}: damaged partial ({exc})") from None


def cache_name(rank_dir: Path) -> str:
    """The rank's entry in the cache folder's partials/ (cache_folder.py)."""
    return hashlib.sha256(str(rank_dir.resolve()).encode()).hexdigest()[:32] + ".json"


def read_file(place: Path) -> bytes:
    """A partial file's bytes, bounded (files.read_regular); PartialError in one line when it cannot
    be read, FileNotFoundError when there is none."""
    from profilectl.errors import FormatError
    from profilectl.files import env_limit, read_regular
    try:
        return read_regular(place, env_limit("MAX_PARTIAL_BYTES", MAX_BYTES), "MAX_PARTIAL_BYTES")
    except FormatError as exc:
        raise PartialError(str(exc)) from None


def read(rank_dir: Path) -> Partial | None:
    """The rank's stored partial (its folder's, else the running user's cache's), None when there is
    none; PartialError when the one found cannot be used."""
    from profilectl import cache_folder
    try:
        return decode(read_file(rank_dir / FILE), str(rank_dir / FILE))
    except FileNotFoundError:
        pass
    data = cache_folder.read("partials", cache_name(rank_dir))
    return None if data is None else decode(data, f"cached partial of {rank_dir}")


def write(rank_dir: Path, partial: Partial) -> Path | None:
    """Beside the rank's files where allowed, else in the running user's cache; None when neither can
    be written (the partial only saves time)."""
    from profilectl import cache_folder
    from profilectl.files import write_into
    data = encode(partial)
    place = rank_dir / FILE
    try:
        write_into(place, lambda fh: fh.write(data))
        return place
    except OSError:
        pass
    cache_folder.keep("partials", cache_name(rank_dir), data)
    return None


# ---------------------------------------------------------------- a job's ranks
@dataclasses.dataclass(frozen=True)
class RankResult:
    """What the job report got of one rank: its partial (None: its numbers are missing), and how."""
    rank: "JobRank"
    partial: Partial | None
    how: str  # "partial", "rebuilt", "partial (raw files gone)", "missing"
    note: str | None = None  # said in the report


def for_rank(job_dir: Path, rank: "JobRank", write_back: bool = True) -> RankResult:
    """The rank's partial, fresh: the stored one if its raw files are unchanged, else rebuilt from
    them (and stored, where allowed). A rank with neither a usable partial nor raw files is named."""
    rank_dir = job_dir / rank.run
    raw = rank_dir / "raw"
    files = identity(raw)
    label = f"rank {rank.rank} ({rank.host})"
    problem = None
    try:
        stored = read(rank_dir)
    except PartialError as exc:
        stored, problem = None, str(exc)
    if stored is not None:
        if unchanged(stored.files, files, raw):
            moved = rewitnessed(stored.files, files)
            if moved is not None and write_back:
                write(rank_dir, dataclasses.replace(stored, files=moved))
            return RankResult(rank, stored, "partial")
        if not files:
            return RankResult(rank, stored, "partial (raw files gone)",
                              f"{label}: its raw files are gone; its numbers come from its partial, made on "
                              f"{stored.made_on} at {stored.made_at}")
        problem = f"{label}: partial stale (its raw files changed since {stored.made_at}): rebuilt"
    if not files:
        return RankResult(rank, None, "missing", f"{label}: no raw files and no partial: its numbers are missing"
                          + (f" ({problem})" if problem else ""))
    partial = make(raw, rank, files)
    if write_back:
        write(rank_dir, partial)
    note = problem if problem and "stale" in problem else (f"{problem}: rebuilt from its raw files" if problem else None)
    return RankResult(rank, partial, "rebuilt", note)


def merged_tables(partials: Iterable[Partial]) -> tuple[Tables, tuple[RankReduction, ...] | None]:
    """The ranks' Tables merged in the order given (the raw read's order, merge_all's fold: the same
    floats), and their timeline reductions (None when no rank's files had timestamps). One partial
    at a time: each is folded in and let go."""
    merged = Tables()
    reductions: list[RankReduction] = []
    had = False
    for partial in partials:
        merged = merged.merge(partial.tables())
        reductions += partial.rank_reductions()
        had = had or partial.had_timelines
    return merged, (tuple(reductions) if had else None)


def summary_of(job_dir: Path, partials: Iterable[Partial]) -> Any:
    """The job's Summary from its ranks' partials (load_job's raw read, without the raw files)."""
    from profilectl.read.summary import SourceInfo, build
    merged, reduced = merged_tables(partials)
    return build(merged, SourceInfo(kind="profilectl-job", path=str(job_dir)),
                 perfetto_trace=merged.trace_files[0] if merged.trace_files else None, reduced=reduced)


def rank_of_partial(partial: Partial) -> "JobRank | None":
    from profilectl.jobs import JobRank
    r = partial.rank
    if r is None:
        return None
    return JobRank(rank=r.rank, host=r.host, status=r.status, run=r.run, exit_code=r.exit_code, message=r.message)


def on_this_node(job_dir: Path) -> tuple[list[Partial], list[str]]:
    """This node's ranks of `job_dir` (those the job ran here: their host is this node; its scratch
    or a shared folder), reduced here: what `profilectl report --on-cluster` runs on each node (a job
    step); the submitting node takes a node's word for its own ranks only. Also what could not be
    reduced, one line per rank (a rank's bad file costs that rank, not the node's others)."""
    from profilectl import jobs
    from profilectl.errors import ProfilectlError
    if not job_dir.is_dir():
        return [], []
    job = jobs.compose(job_dir)
    here = local_host().split(".")[0]
    out, problems = [], []
    for rank in (r for r in job.ranks if r.host.split(".")[0] == here):
        try:
            result = for_rank(job_dir, rank)
        except (ProfilectlError, OSError) as exc:
            problems.append(f"rank {rank.rank} ({rank.host}): not reduced: {exc}")
            continue
        if result.note:
            problems.append(result.note)
        if result.partial is not None:
            out.append(dataclasses.replace(result.partial, rank=RankIdentity(
                rank=rank.rank, host=rank.host, run=rank.run, status=rank.status, exit_code=rank.exit_code,
                message=rank.message)))
    return out, problems


def local_host() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()
