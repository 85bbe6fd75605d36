"""Partials for a bare profiler output: a folder where a tool wrote one output per process
(rocprofv3's `<host>/<pid>_kernel_trace.csv` or `<host>/<pid>_results.db`, torch.profiler's
`<host>-rank<R>-<pid>.pt.trace.json.gz`), e.g. copied back from the nodes' local scratch.

`profilectl report FOLDER --reduce-here [-o PARTIALS]` reads each rank's files once and writes one
partial per rank (read/partials.py's Partial, with the rank's key in `bare`) to PARTIALS (default
FOLDER/profilectl-partials/); a job's epilogue runs it on each node against that node's scratch,
with -o pointing at one shared folder. `profilectl report` on the folder (or on PARTIALS alone)
then merges the partials instead of the raw files: a partial whose files changed is rebuilt, a rank
found in the raw files without a partial is reduced and stored, a rank whose files are gone keeps
its partial's numbers and is named. `--raw` reads the raw files.

The ranks are the ones the raw read already tells apart (formats/ranks.py; a status file of
profilectl's start-up hook goes with its rank); files that name no rank form one group of their
own ("rest"). The partials are merged in the raw read's order (the readers' order, then the
reader's own order of ranks), so the merged figures are the raw read's.

A folder of partials may be someone else's (a shared folder), so what a partial says is data, never
a place to go: only what lies under the folder given is read. A partial whose `folder` lies
elsewhere keeps its numbers, but that folder is not read (nor checked, nor rebuilt from, nor
written back), and the report says so in one line; the files a partial names outside the folder
given are never opened (not even for their headers). Partial files are read bounded
(partials.read_file: no link, fifo, device or oversized file).
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from profilectl.errors import FormatError, UsageError
from profilectl.formats.reader import Reader, recognised, read_groups
from profilectl.model.tables import Source, Tables
from profilectl.read import partials

if TYPE_CHECKING:
    from profilectl.read.summary import Summary

FOLDER = "profilectl-partials"  # the default place of a folder's partials, inside it
SUFFIX = ".partial.json"
REST = "rest"  # the group of files that name no rank
# readers whose read() orders the ranks by host then rank (rocprofv3's _host_then_rank), not by path
HOST_THEN_RANK = ("rocprofv3-csv",)


@dataclasses.dataclass(frozen=True)
class RankKey:
    """Which rank a file of a bare output belongs to (its rank and host, or REST for files that name none); it names
    the rank's partial."""
    rank: str  # "0", "pid 4242", or REST
    host: str | None

    @property
    def label(self) -> str:
        return f"rank {self.rank}" + (f" ({self.host})" if self.host else "") if self.rank != REST else \
            "files that name no rank"

    @property
    def file_name(self) -> str:
        text = f"{self.host}.{self.rank}" if self.host else self.rank
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text) + SUFFIX


def _key_of(path: Path) -> RankKey:
    from profilectl.formats import rank_status, ranks
    status = rank_status.NAME.match(path.name)
    if status:  # rank-<R>-<host>-<pid>.status.json: the rank's own
        return RankKey(status.group("rank"), status.group("host"))
    rank, host = ranks.identity(path)
    if rank.isdigit() or rank.startswith("pid "):
        return RankKey(rank, host)
    return RankKey(REST, None)


@dataclasses.dataclass(frozen=True)
class RankGroup:
    """One rank's files in a bare output folder, by reader, and where the raw read would merge them."""
    key: RankKey
    groups: list[tuple[Reader, list[Path]]]
    order: tuple[int, str]  # where the raw read merges it: (reader, then the reader's own order)


def rank_groups(folder: Path) -> list[RankGroup]:
    """The folder's recognised files split by rank, in the raw read's order; FormatError when no
    file is recognised (the reader's own message)."""
    from profilectl.formats.registry import READERS
    claimed = recognised(folder, READERS)
    split: dict[RankKey, list[tuple[Reader, list[Path]]]] = {}
    order: dict[RankKey, tuple[int, str]] = {}
    for reader, files in claimed:
        for path in files:
            key = _key_of(path)
            mine = split.setdefault(key, [])
            if not mine or mine[-1][0] is not reader:
                mine.append((reader, []))
            mine[-1][1].append(path)
            # the reader's files come sorted by path (as Path objects compare: part by part, which
            # "\0" between the parts keeps in a string): the same order on every node's folder
            place = f"{key.host or ''}\0{key.rank}" if reader.kind in HOST_THEN_RANK else \
                "\0".join(path.relative_to(folder).parts)
            here = (READERS.index(reader), place)
            order[key] = min(order.get(key, here), here)
    return sorted((RankGroup(key, groups, order[key]) for key, groups in split.items()), key=lambda g: g.order)


def _files_of(root: Path, group: RankGroup) -> tuple[partials.FileIdentity, ...]:
    """The group's files as stat sees them now (partials.unchanged compares them with a partial's)."""
    found = [partials.stat_identity(root, path) for _, files in group.groups for path in files]
    return tuple(sorted(found, key=lambda f: f.path))


def make(root: Path, group: RankGroup) -> partials.Partial:
    """One rank's files read once (as the raw read reads them) and reduced."""
    from profilectl.formats.ranks import rank_row
    started = time.perf_counter()
    files = partials.hashed(root, _files_of(root, group))  # hashed before the files are read
    tables = read_groups(group.groups)
    # rocprofv3's CSV reader names ranks only where there are several: this rank's row (one process
    # alone has no rank table either way: summary.rank_summaries shows two or more)
    if group.key.rank != REST and not tables.ranks and (tables.kernels or tables.operators):
        tables = dataclasses.replace(tables, ranks=(rank_row(group.key.rank, group.key.host, tables.kernels,
                                                             tables.operators),))
    partial = partials.of_tables(tables, root.resolve(), files, seconds=time.perf_counter() - started)
    return dataclasses.replace(partial, bare=partials.BareRank(rank=group.key.rank, host=group.key.host,
                                                               order_reader=group.order[0],
                                                               order_place=group.order[1]))


def partials_folder(folder: Path, output: str | None) -> Path:
    return Path(output) if output else folder / FOLDER


def reduce_command(folder: Path, output: str | None, out: TextIO, err: TextIO | None = None) -> int:
    """`report FOLDER --reduce-here [-o PARTIALS]`: one partial per rank, one line per partial; a
    rank whose files cannot be read is named (on `err`) and the others still reduced."""
    import sys
    err = sys.stderr if err is None else err
    if not folder.exists():
        raise UsageError(f"{folder} does not exist")
    if (folder / "manifest.json").is_file():  # a run of profilectl's: its report is its summary.json
        raise UsageError(f"{folder} is a profilectl run directory: `report {folder}` reads its summary; "
                         "--reduce-here reduces a SLURM job folder or a profiler's own output folder")
    target = partials_folder(folder, output)
    folder = folder.resolve()  # the partials name their files from anywhere they are read
    try:
        found = rank_groups(folder)
    except FormatError as exc:
        raise FormatError(f"{exc}: no ranks to reduce") from None
    try:
        target.mkdir(parents=True, exist_ok=True)
        _try_writing(target)
    except OSError as exc:
        raise UsageError(f"{target}: cannot write partials there ({exc.strerror or exc})") from None
    from profilectl.errors import ProfilectlError
    from profilectl.files import write_atomic
    failed = []
    for group in found:
        try:  # a rank's bad file costs that rank, not the others
            partial = make(folder, group)
        except (ProfilectlError, OSError) as exc:
            failed.append(group.key.label)
            err.write(f"profilectl: {group.key.label}: not reduced: {exc}\n")
            continue
        data = partials.encode(partial)
        place = target / group.key.file_name
        try:
            write_atomic(place, lambda fh: fh.write(data), binary=True)
        except OSError as exc:
            raise UsageError(f"{place}: cannot write ({exc.strerror or exc})") from None
        out.write(f"{place}  {group.key.label}: {len(partial.files)} file(s), {len(partial.kernels.name)} kernel(s), "
                  f"{len(partial.operators.name)} operator(s), {partial.seconds:.2f} s\n")
        out.flush()
    if failed:
        raise FormatError(f"{len(failed)} of {len(found)} rank(s) not reduced: {', '.join(failed[:5])}"
                          + (" ..." if len(failed) > 5 else ""))
    return 0


def _try_writing(folder: Path) -> None:
    """OSError when no file can be made in `folder` (tried as every write is made: files.write_in)."""
    import os

    from profilectl.files import NEW_FILE_FLAGS, open_folder, temporary_name
    fd = open_folder(folder)
    try:
        name = temporary_name("write-test")
        os.close(os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=fd))
        os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def _store(place: Path, partial: partials.Partial) -> None:
    """A partial written back (files.write_into), or not at all: it only saves time."""
    from profilectl.files import write_into
    data = partials.encode(partial)
    try:
        write_into(place, lambda fh: fh.write(data))
    except OSError:
        pass


def lies_under(path: Path | str, folder: Path) -> bool:
    """Whether `path` (resolved) lies in `folder` (resolved) or is it."""
    import os
    inside, top = os.path.realpath(path), os.path.realpath(folder)
    return inside == top or inside.startswith(top.rstrip(os.sep) + os.sep)


# ---------------------------------------------------------------- reading them
def stored_partials(folder: Path) -> Path | None:
    """Where the folder's partials are: FOLDER/profilectl-partials/, or the folder itself when it
    holds partials; None when it holds none."""
    for place in (folder / FOLDER, folder):
        if place.is_dir() and any(place.glob(f"*{SUFFIX}")):
            return place
    return None


def _read_stored(place: Path) -> tuple[dict[RankKey, tuple[Path, partials.Partial]], dict[str, str]]:
    """The partials in `place` by rank, and those that cannot be used (file name: why, in one line)."""
    found = {}
    unusable = {}
    for path in sorted(place.glob(f"*{SUFFIX}")):
        try:
            partial = partials.decode(partials.read_file(path), str(path))
        except OSError as exc:
            unusable[path.name] = f"{path}: cannot read ({exc.strerror})"
            continue
        except partials.PartialError as exc:
            unusable[path.name] = str(exc)
            continue
        if partial.bare is None:
            raise FormatError(f"{path}: a job rank's partial, not a bare folder's (report the job folder)")
        found[RankKey(partial.bare.rank, partial.bare.host)] = (path, partial)
    return found, unusable


def load(folder: Path, place: Path) -> "Summary":
    """The folder's summary from its partials (in `place`): fresh ones merged, stale ones rebuilt and
    stored back, ranks in the raw files without a partial reduced and stored, ranks whose files are
    gone named (their partials' numbers kept).

    The raw files are looked for in `folder` where the partials are inside it (a folder copied back
    from scratch keeps sizes and mtimes: its partials stay fresh), else where each partial says it
    was made (a shared folder of several nodes' partials: each node's scratch, if this machine sees it)."""
    stored, unusable = _read_stored(place)
    inside = place != folder
    named = list(dict.fromkeys(Path(p.folder) for _, p in stored.values()))
    roots = [folder.resolve()] if inside else [r for r in named if lies_under(r, folder)]
    elsewhere = [] if inside else [r for r in named if not lies_under(r, folder)]
    current: dict[RankKey, tuple[Path, RankGroup]] = {}
    unseen: list[Path] = []
    for root in roots:
        if not root.is_dir():
            unseen.append(root)
            continue
        try:
            current.update({g.key: (root, g) for g in rank_groups(root)})
        except FormatError:
            pass  # nothing of a profiler's left there: the partials' ranks are named below
    notes: list[str] = []
    rebuilt: list[str] = []
    used: list[partials.Partial] = []
    for key in dict.fromkeys([*stored, *current]):
        partial = stored[key][1] if key in stored else None
        if key not in current:
            assert partial is not None
            if inside or Path(partial.folder) not in unseen + elsewhere:
                notes.append(f"{key.label}: its raw files are gone; its numbers come from its partial, made on "
                             f"{partial.made_on} at {partial.made_at}")
            used.append(partial)
            continue
        root, group = current[key]
        now = _files_of(root, group)
        if partial is not None and partials.unchanged(partial.files, now, root):
            moved = partials.rewitnessed(partial.files, now)
            if moved is not None:  # hashed once after a copy: known by stat again next time
                _store(place / key.file_name, dataclasses.replace(partial, files=moved))
            used.append(partial)
            continue
        fresh = make(root, group)
        if partial is not None:
            notes.append(f"{key.label}: partial stale (its raw files changed since {partial.made_at}): rebuilt")
        elif key.file_name in unusable:  # its raw files are here: the damaged one is replaced
            notes.append(f"{unusable.pop(key.file_name)}: rebuilt from its raw files")
        rebuilt.append(key.label)
        _store(place / key.file_name, fresh)
        used.append(fresh)
    if unusable:  # a damaged partial whose rank's raw files are not here: its numbers are lost
        why = next(iter(unusable.values()))
        raise FormatError(f"{why} (remove it, or make it again with `profilectl report RAW_FOLDER --reduce-here`)")
    if unseen:
        notes.append(f"{sum(Path(p.folder) in unseen for _, p in stored.values())} rank(s) merged from their "
                     f"partials only: their folders are not on this machine ({', '.join(map(str, unseen[:3]))}"
                     + (" ..." if len(unseen) > 3 else "") + ")")
    if elsewhere:
        notes.append(f"{sum(Path(p.folder) in elsewhere for _, p in stored.values())} rank(s) merged from their "
                     f"partials only: they name folders outside {folder} ({', '.join(map(str, elsewhere[:3]))}"
                     + (" ..." if len(elsewhere) > 3 else "") + "), which are not read from a folder of partials")
    if rebuilt:
        notes.append(f"{len(rebuilt)} of {len(used)} rank(s) read from raw files (no fresh partial): "
                     + ", ".join(rebuilt[:20]) + (" ..." if len(rebuilt) > 20 else ""))
    if inside:  # the files named as the raw read of `folder` names them (a moved folder's, where they are now)
        used = [_moved(p, folder) for p in used]
    summary = summary_of(folder, used)
    return dataclasses.replace(summary, notes=summary.notes + tuple(notes))


def _moved(partial: partials.Partial, root: Path) -> partials.Partial:
    """The partial's files named under `root`, as given (the raw read's names): where the folder is
    now (copied back from scratch), relative where the user named it so."""
    if partial.folder == str(root):
        return partial
    before = partial.folder.rstrip("/") + "/"

    def here(name: str) -> str:
        return str(root / name[len(before):]) if name.startswith(before) else name
    return dataclasses.replace(partial, folder=str(root),
                               sources=tuple(Source(s.kind, tuple(map(here, s.files))) for s in partial.sources),
                               trace_files=tuple(map(here, partial.trace_files)))


def merged(used: list[partials.Partial]) -> tuple[Tables, tuple | None]:
    """The partials folded in the raw read's order, with one Source per reader (as the raw read)."""
    ordered = sorted(used, key=lambda p: (p.bare.order_reader, p.bare.order_place) if p.bare else (0, ""))
    tables, reduced = partials.merged_tables(ordered)
    by_kind: dict[str, list[str]] = {}
    for source in tables.sources:
        by_kind.setdefault(source.kind, []).extend(source.files)
    return dataclasses.replace(tables, sources=tuple(Source(kind, tuple(files)) for kind, files in by_kind.items())), \
        reduced


def summary_of(folder: Path, used: list[partials.Partial]) -> "Summary":
    """What load.load builds from the raw files, built from the partials."""
    from profilectl.countersets import derived_for_files
    from profilectl.read.summary import SourceInfo, build
    tables, reduced = merged(used)
    source = SourceInfo(kind="+".join(s.kind for s in tables.sources), path=str(folder),
                        files=tuple(f for s in tables.sources for f in s.files))
    derived = derived_for_files({c.counter for c in tables.counters})
    return build(tables, source, derived or None, perfetto_trace=tables.trace_files[0] if tables.trace_files else None,
                 reduced=reduced)
