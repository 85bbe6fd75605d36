"""torch.profiler Chrome-trace JSON (export_chrome_trace, `.json` or `.json.gz`, `*.pt.trace.json.gz`):
kernels, copies, CUDA/HIP runtime and driver calls, and operators as torch's key_averages() counts
them (calls, total and self time). The file is streamed (formats/chrome_stream.py): memory stays flat
whatever its size."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl.formats import json_head, ranks, torch_shapes
from profilectl.formats.reader import Reader
from profilectl.model.timeline import sink
from profilectl.model.tables import (PER_DISPATCH, AnnotationRow, CollectiveCall, KernelStats, StatsByName, Tables,
                                       TraceClock, merge_all)

if TYPE_CHECKING:
    from profilectl.model.memory import MemoryReport
    from profilectl.model.timeline import RankTimeline
    from profilectl.formats.chrome_events import ChunkSums, SumsByName, TimelineEvents


BASE_TIME = "baseTimeNanoseconds"  # Kineto's: the epoch time (ns) the trace's timestamps count from



NO_GPU_ACTIVITY = "the trace holds no GPU activity"  # a CPU-only trace's note (the report's headline says it once)

def _stats(sums: "SumsByName") -> StatsByName:
    return {name: KernelStats.from_integer_sums(*values) for name, values in sums.items()}


def read(path: Path, fast: bool = True, workers: int | None = None) -> Tables:
    """Chrome traces carry microseconds; tables are in integer nanoseconds like every other reader."""
    from profilectl.formats import chrome_stream, chrome_tree  # only when a trace is read (env-check loads this module)
    from profilectl.formats.chrome_parallel import gc_paused
    partial = chrome_stream.read_trace(path, fast=fast, workers=workers)
    with gc_paused():  # a million small lists: the cyclic collector would rescan them
        sums, annotation_sums = chrome_tree.tree_sums(partial)
    operators = {name: KernelStats.from_integer_sums(n, total, total_sq, low, high, self_total=self_ns)
                 for name, (n, total, self_ns, total_sq, low, high) in sums.items()}
    kernels = _stats(partial.kernels)
    rank, host = ranks.identity(path)
    linked = bool(len(partial.timeline.api_correlation))
    timelines = () if partial.untimed else _timeline(rank, host, partial.timeline, partial)
    collectives = _collectives(rank, partial)
    if timelines and collectives and (analyses := sink()) is not None:
        # hidden behind compute: measured here, where the rank's kernels are (by the analysis layer's sink)
        collectives = analyses.collective_overlap(collectives, timelines[0])
    annotations = tuple(AnnotationRow(rank=rank, name=name, calls=n, total_ns=total, self_ns=self_ns,
                                      gpu_ns=gpu if linked else None, min_ns=low, max_ns=high)
                        for name, (n, total, self_ns, _sq, low, high, gpu) in annotation_sums.items())
    return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0,
                  memory_copies=_stats(partial.copies), api=_stats(partial.api), operators=operators,
                  annotations=annotations, collectives=collectives, clocks=_clocks(rank, host, partial),
                  trace_files=(str(path),), ranks=(ranks.rank_row(rank, host, kernels, operators),),
                  timelines=timelines,
                  operator_shapes=torch_shapes.operator_shapes(rank, partial), memory=_memory(rank, path, partial),
                  notes=_notes(path, partial))


def _whole(value: Any) -> int | None:
    """An integer arg as Kineto writes it (a number, or a number's text); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip().strip('"'))
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _collectives(rank: str, partial: "ChunkSums") -> tuple[CollectiveCall, ...]:
    """The events carrying a collective's args (chrome_events.COLLECTIVE_ARGS), in file order."""
    rows = []
    for on_gpu, event, start, end, values in partial.collectives:
        (name, pg_name, pg_id, pg_desc, seq, seq_lower, in_nelems, out_nelems, group_size, dtype,
         group_ranks) = values
        rows.append(CollectiveCall(
            rank=rank, side="gpu" if on_gpu else "host", event=event, name=str(name),
            process_group=_text(pg_name if pg_name is not None else pg_id), process_group_desc=_text(pg_desc),
            sequence=_whole(seq if seq is not None else seq_lower), start_ns=start, end_ns=end,
            in_elements=_whole(in_nelems), out_elements=_whole(out_nelems), group_size=_whole(group_size),
            dtype=_text(dtype), group_ranks=_text(group_ranks)))
    return tuple(rows)


def _memory(rank: str, path: Path, partial: "ChunkSums") -> tuple["MemoryReport", ...]:
    """profile_memory's events, where the trace has them (formats/torch_memory.py)."""
    if not partial.memory_events:
        return ()
    from profilectl.formats.memory_history import from_profile_events
    return from_profile_events(partial.memory_events, rank, path.name)


def _clocks(rank: str, host: str | None, partial: "ChunkSums") -> tuple[TraceClock, ...]:
    base = _whole(partial.top_level.get(BASE_TIME))
    return (TraceClock(rank=rank, host=host, base_ns=base, source=BASE_TIME),) if base is not None else ()


def _notes(path: Path, partial: "ChunkSums") -> tuple[str, ...]:
    if partial.untimed:
        return (f"no timeline analysis for {path.name}: {partial.untimed} events have no timestamp (\"ts\"); the "
                "tables are complete",)
    if not len(partial.timeline.start) and partial.threads:
        return (f"no GPU timeline for {path.name}: {NO_GPU_ACTIVITY} (no kernel, copy or memset "
                "event: a CPU-only job, or a profile of ProfilerActivity.CPU only); its operator and annotation "
                "tables are complete",)
    return ()


def _timeline(rank: str, host: str | None, events: "TimelineEvents", partial: "ChunkSums | None" = None
              ) -> tuple["RankTimeline", ...]:
    if not len(events.start):
        return ()
    from profilectl.model.timeline import Marker, rank_timeline
    from profilectl.formats.torch_host import host_activity
    return (rank_timeline(rank, host, start=events.start, end=events.end, stream=events.stream, kind=events.kind,
                          name=events.name, correlation=events.correlation, names=events.names,
                          streams=events.streams, api_start=events.api_start, api_end=events.api_end,
                          api_correlation=events.api_correlation,
                          markers=[Marker(*marker) for marker in events.markers],
                          host_activity=host_activity(partial) if partial is not None else None, program="torch"),)


def is_chrome_trace(path: Path) -> bool:
    """A JSON object whose top-level keys, read in order, reach a "traceEvents" array (whatever comes
    before it: Kineto's device properties, a harness's metadata), or a bare JSON array of events
    (formats/json_head.py)."""
    head = json_head.head_of(path)
    if head.kind == "array":
        first = head.first.lstrip()
        return first[:1] == b"]" or (first[:1] == b"{" and b'"ph"' in first)
    return head.array_key == "traceEvents"


class ChromeTraceReader(Reader):
    kind = "chrome-trace"

    def recognises(self, path: Path) -> bool:
        return is_chrome_trace(path)

    def read_file(self, path: Path) -> Tables:
        return read(path)

    def read(self, files: list[Path]) -> Tables:
        """One trace per rank: each large one is spread over the cores by itself; several smaller
        ones are read side by side, one process each."""
        from profilectl.formats.chrome_parallel import pool, workers_for
        if len(files) < 2 or any(workers_for(f.stat().st_size) > 1 for f in files) \
                or workers_for(sum(f.stat().st_size for f in files)) <= 1:
            return merge_all(read(f) for f in files)
        with pool(workers_for(sum(f.stat().st_size for f in files))) as executor:
            return merge_all(executor.map(_read_alone, files))


def _read_alone(path: Path) -> Tables:
    return read(path, workers=1)
