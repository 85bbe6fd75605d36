"""The reader interface: each backend names the readers of the files its tool writes.

A reader recognises its files by name and first bytes (cheap: `report` on a folder asks every
registered reader about every file) and turns a group of them into Tables.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Sequence, TypeVar

from profilectl import settings
from profilectl.errors import FormatError
from profilectl.model.tables import Source, Tables, merge_all


class Reader(ABC):
    kind: ClassVar[str]  # names the source in reports ("rocprofv3-csv", "chrome-trace" ...)
    reduces_ranks: ClassVar[bool] = False  # read_reducing lets each rank's events go as it reads the next

    @abstractmethod
    def recognises(self, path: Path) -> bool:
        """Is this file one this reader's tool writes?"""

    def read(self, files: list[Path]) -> Tables:
        """Tables from every recognised file (one tool's files of one run: processes, passes)."""
        return merge_all(self.read_file(path) for path in files)

    def read_file(self, path: Path) -> Tables:
        """One file's tables; readers that need all files at once override `read` instead."""
        raise NotImplementedError(f"{type(self).__name__} reads its files together")

    def read_reducing(self, files: list[Path]) -> Tables:
        """`read`, where the files hold several ranks, with each rank's timeline reduced
        (analysis/reduce.py) as soon as the rank is read, and its events let go: Tables.reductions in
        place of Tables.timelines, the same numbers. Only where no other reader's timelines can
        belong to the same ranks (read_groups); readers with `reduces_ranks` override it."""
        return self.read(files)


def release_freed_memory() -> None:
    """Hands the C heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing).
    numpy arrays under glibc's mmap threshold (it grows to 32 MiB) come from the heap, and a rank's
    columns freed before the next rank is read otherwise stay in the process's peak."""
    global _trim
    if _trim is None:
        try:
            import ctypes
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None
T = TypeVar("T")
CONCURRENT_MIN_BYTES = 16 << 20  # several files smaller than this together: one after the other


def each_file(read: Callable[[Path], T], files: Sequence[Path], concurrent: bool = True) -> list[T]:
    """read(file) for every file, in order; concurrently (one thread per core) when there are
    several large ones and `concurrent`: for readers whose work runs outside the GIL (connectorx,
    polars). Python-heavy reading (sqlite3 rows) loses in threads: they pass the GIL back and forth."""
    try:
        total = sum(f.stat().st_size for f in files)
    except OSError:
        total = 0
    if not concurrent or len(files) < 2 or total < CONCURRENT_MIN_BYTES or settings.get_bool("PROFILECTL_NO_PARALLEL"):
        return [read(f) for f in files]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        return list(pool.map(read, files))  # in file order: merges give the same numbers


def first_bytes(path: Path, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def claim(files: Sequence[Path], readers: Sequence[Reader]) -> list[tuple[Reader, list[Path]]]:
    """Each file goes to the first reader that recognises it."""
    claimed: dict[int, list[Path]] = {}
    for path in files:
        for index, reader in enumerate(readers):
            if reader.recognises(path):
                claimed.setdefault(index, []).append(path)
                break
    return [(readers[i], paths) for i, paths in sorted(claimed.items())]


def candidate_files(path: Path) -> list[Path]:
    if not path.exists():
        raise FormatError(f"{path} does not exist")
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))


Groups = list[tuple[Reader, list[Path]]]


# What `report` reads, as a user names the files (docs/usage.md's list): said when nothing is recognised.
READ_KINDS = ("a profilectl run (`profilectl ls` lists them) or SLURM job folder; rocprofv3's CSV, JSON, rocpd .db "
              "or .pftrace; rocprof's results*.csv; Nsight Compute CSV; Nsight Systems .nsys-rep or its SQLite "
              "export; torch.profiler, JAX or TensorFlow traces (.json, .json.gz)")


def recognised(path: Path, readers: Sequence[Reader]) -> Groups:
    """The files under path that `readers` recognise, grouped by reader; FormatError when none."""
    files = candidate_files(path)
    groups = claim(files, readers)
    if not groups:
        what = ("in this file" if path.is_file() else ": the folder is empty" if not files else
                f"among the folder's {len(files)} file(s)")
        raise FormatError(f"{path}: no profiler output recognised {what}; report reads {READ_KINDS}".replace(" :", ":"))
    return groups


@contextlib.contextmanager
def numpy_without_huge_page_hints() -> Iterator[None]:
    """numpy asks the kernel for huge pages (madvise) for every array of 4 MB or more. A reader's
    columns are written once and let go, and faulting them in as huge pages cost 0.9 s of CPU of
    a 10 M-dispatch report's 9.8 (5.58 s against 5.14 s, docs/validation.md). Off while reading, put
    back after (a notebook's numpy keeps its own setting; no environment variable is set, so no
    program started meanwhile sees it), unless the user set numpy's own switch,
    NUMPY_MADVISE_HUGEPAGE; a numpy without the switch keeps its own way."""
    switch = None
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        import numpy as np
        core = getattr(np, "_core", None) or getattr(np, "core", None)
        switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is None:
        yield
        return
    previous = switch(False)
    try:
        yield
    finally:
        switch(previous)


def read_groups(groups: Groups, reduce_ranks: bool = False) -> Tables:
    """Each group read, merged in the groups' order. `reduce_ranks`: where exactly one group's reader
    `reduces_ranks` and no other group gives timelines (a torch trace of the same ranks would be
    combined with their raw events), that group is read last with read_reducing: its ranks'
    timelines come reduced (Tables.reductions, for summary.build), never all held at once."""
    with numpy_without_huge_page_hints():
        return _read_groups(groups, reduce_ranks)


def _read_groups(groups: Groups, reduce_ranks: bool) -> Tables:
    reducing = [i for i, (reader, _) in enumerate(groups) if reader.reduces_ranks] if reduce_ranks else []
    order = [i for i in range(len(groups)) if i not in reducing] + reducing if len(reducing) == 1 else \
        list(range(len(groups)))
    read: dict[int, Tables] = {}
    for i in order:
        reader, files = groups[i]
        alone = len(reducing) == 1 and i == reducing[0] and not any(t.timelines for t in read.values())
        read[i] = reader.read_reducing(files) if alone else reader.read(files)
    return merge_all(Tables(sources=(Source(reader.kind, tuple(str(f) for f in files)),)).merge(read.pop(i))
                     for i, (reader, files) in enumerate(groups))


def read_path(path: Path, readers: Sequence[Reader], required: bool = True) -> Tables:
    """Every file under path that one of `readers` recognises, read and merged. Nothing recognised
    is a FormatError when `required`, else empty Tables (a profiler that wrote nothing)."""
    try:
        groups = recognised(path, readers)
    except FormatError:
        if required or not path.exists():
            raise
        return Tables()
    return read_groups(groups)
