"""Every reader of a file some tool writes, in the order `report` tries them on a bare folder: a
file goes to the first reader that recognises it, so readers that match exact file names come
before the generic Chrome-trace reader (timing_trace.json is a Chrome trace too). A registry that
owns nothing else: it needs neither the planner nor the backends (each backend names its own
readers from these modules), and it imports only the readers' modules."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import overload

from profilectl.formats.reader import Reader


@functools.lru_cache(maxsize=None)
def _csv_reader() -> Reader:
    # its module alone: a folder of rocprofv3 CSVs is claimed by the first reader (cold start)
    from profilectl.formats import rocprofv3
    return rocprofv3.Rocprofv3CsvReader()


@functools.lru_cache(maxsize=None)
def readers() -> tuple[Reader, ...]:
    from profilectl.formats import jax_trace, nccl_inspector, ncu, nsys_sqlite, pc_sampling, rank_status, rocpd, \
        rocprof_compute, rocprof_legacy, rocprof_sys, rocprofv3, rocprofv3_json, rocprofv3_stats, timing, torch_memory, \
        torch_trace
    return (_csv_reader(), rocpd.RocpdReader(), rocprofv3_json.Rocprofv3JsonReader(),
            rocprofv3_stats.Rocprofv3StatsReader(), pc_sampling.PcSamplingReader(), rocprofv3.PerfettoTraceReader(),
            rocprof_compute.RocprofComputeReader(), rocprof_sys.RocprofSysPerfettoReader(),
            rocprof_legacy.ResultsReader(), rocprof_legacy.StatsReader(), rocprof_legacy.TraceReader(),
            ncu.NcuCsvReader(), rank_status.RankStatusReader(), nsys_sqlite.NsysReader(), timing.TimingReader(),
            torch_memory.TorchMemoryReader(), nccl_inspector.NcclInspectorReader(), jax_trace.XlaTraceReader(),
            torch_trace.ChromeTraceReader())


def kinds() -> tuple[str, ...]:
    """The kinds of files read, by reader, for messages that say what `report` takes."""
    return tuple(dict.fromkeys(r.kind for r in readers()))


class _Readers(Sequence[Reader]):
    """readers() in order, made when first asked for past the first: `claim` stops at the first reader
    that recognises a file, so a folder of rocprofv3 CSVs never imports the other readers' modules
    (rocpd, torch, nsys, pickle, sqlite3...: a cold `report` of a CSV pays for its reader only)."""

    @overload
    def __getitem__(self, index: int) -> Reader: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Reader, ...]: ...

    def __getitem__(self, index: int | slice) -> Reader | tuple[Reader, ...]:
        if index == 0:  # without len(): that would make every reader
            return _csv_reader()
        return readers()[index]

    def __len__(self) -> int:
        return len(readers())

    def __iter__(self) -> Iterator[Reader]:
        yield _csv_reader()
        yield from readers()[1:]

    def __repr__(self) -> str:
        return f"READERS{readers()!r}"


READERS: Sequence[Reader] = _Readers()  # imported where files are read; each reader's module when first asked for
