"""Time on the timeline: is the GPU idle and when, do streams overlap, is communication hidden under
compute, is the job launch-bound, which step was slow. Over the GPU events of any trace with
timestamps (torch Chrome traces, rocprofv3 CSV/JSON traces, rocpd databases), per rank and merged.

Definitions, chosen to match Holistic Trace Analysis (HTA) where it has the same number:
- span: from the first GPU activity's start to the last one's end, per rank (HTA: the trace's
  kernel time span); busy: the union of every kernel, copy and memset on every stream of the rank
  (HTA's temporal breakdown counts the same three kinds); idle = span - busy.
- idle gaps: the holes in that union. Gaps shorter than gap_min_ns (verdicts.yaml) are counted in idle time but not
  as gaps (they are the launch granularity of back-to-back kernels, not a GPU waiting on the host).
- concurrency: time with two or more GPU activities running at once (on different streams).
- communication: NCCL/RCCL kernels; compute: every other kernel (copies and memsets are neither);
  hidden communication: the part of the communication time during which compute also runs, as a
  share of communication time (HTA's comm/comp overlap).
- launch-bound indicators: GPU time in kernels that ran shorter than their own launch call on the
  CPU (HTA's "short kernels"; where no launch is linked, shorter than SHORT_KERNEL_NS); launch call
  time against kernel time; the launch delay (the launch call's end to the kernel's start, HTA's);
  the mean launch queue depth (kernels launched and not yet finished, all streams: not HTA's queue
  length, which counts all GPU work per stream until it starts).
- HTA by default drops kernels launched after the last ProfilerStep began
  (include_last_profiler_step=False): every kernel of the trace counts here.
- steps: analysis/steps.py (the host side's step ranges); a step's GPU busy time is the busy union
  clipped to its window, its top kernel the one with most GPU time among those launched inside it.
Every definition, with its one place in the code: docs/definitions.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from profilectl.model.collectives import is_collective  # noqa: F401 (re-exported)
from profilectl.analysis.intervals import CHUNK_ROWS, Blocks, UnionStream, busy_union, union
from profilectl.analysis.rank_stream import TOP_GAPS, RankStream, StartOrderFeed, analyse_rank, \
    collective_mask, launch_verdict  # noqa: F401 (RankStream, StartOrderFeed, analyse_rank: re-exported)
from profilectl.model.reductions import RankPiece
from profilectl.model.timeline import (COPY, HOST_ANNOTATION, HOST_CATEGORY_NAMES, HOST_OPERATOR, HOST_PYTHON,  # noqa: F401
                                       HOST_RUNTIME, KERNEL, BusyCurve, Gap, HostActivity, LaunchStats, Marker,
                                       RankTimeline, RanksBusy, StepRow, StreamedFigures, TimelineAnalysis, TimelineRow,
                                       combine, rank_order, rank_timeline)
from profilectl.model.timeline import sorted_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAX_CURVE_POINTS = 300  # busy-over-time samples per rank, for the report's timeline chart


def _curves_on_one_axis(blocks_per_rank: list[tuple[str, tuple["NDArray[np.int64]", "NDArray[np.int64]"]]]
                        ) -> tuple[BusyCurve, ...]:
    """Every rank's busy curve over the same span (all ranks' first start to last end), so the
    lanes of the chart line up in time."""
    spans = [(int(s[0]), int(e[-1])) for _, (s, e) in blocks_per_rank if len(s)]
    if not spans:
        return ()
    low, high = min(a for a, _ in spans), max(b for _, b in spans)
    return tuple(_curve(rank, blocks, low, high) for rank, blocks in blocks_per_rank)


def _curve(rank: str, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"], low: int, high: int) -> BusyCurve:
    import numpy as np
    buckets = MAX_CURVE_POINTS  # fewer would average a gap away
    width = max(1, -(-(high - low) // buckets))
    edges = low + width * np.arange(buckets + 1, dtype=np.int64)
    # busy time up to each edge, from the cumulative union
    s, e = blocks

    def busy_until(t: "NDArray[np.int64]") -> "NDArray[np.int64]":
        i = np.searchsorted(s, t, side="right")  # blocks starting at or before t
        partial = np.where(i > 0, np.minimum(t, e[np.maximum(i - 1, 0)]) - s[np.maximum(i - 1, 0)], 0)
        return _prefix_lengths(s, e, np.maximum(i - 1, 0)) * (i > 0) + np.clip(partial, 0, None)
    busy = np.diff(busy_until(edges)) / width
    return BusyCurve(rank=rank, start_ns=low, bucket_ns=int(width), busy=tuple(round(float(b), 4) for b in busy))


def _prefix_lengths(s: "NDArray[np.int64]", e: "NDArray[np.int64]", upto: "NDArray[np.int64]",
                    chunk_rows: int = CHUNK_ROWS) -> "NDArray[np.int64]":
    """The total length of blocks [0, k) for each k of `upto`, chunk by chunk (as a cumulative sum of
    every block's length would give, without that array)."""
    import numpy as np
    out = np.zeros(len(upto), dtype=np.int64)
    running = 0
    for at in range(0, len(s), chunk_rows):
        done = np.cumsum(e[at:at + chunk_rows] - s[at:at + chunk_rows])
        inside = (upto > at) & (upto <= at + len(done))
        out[inside] = running + done[upto[inside] - at - 1]
        running += int(done[-1])
    return out


# ---------------------------------------------------------------- steps
def steps_of(t: RankTimeline, blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"] | None = None
             ) -> tuple[list[StepRow], str]:
    """Per-step rows over the rank's step windows (analysis/steps.py); `blocks`: the rank's busy
    blocks where analyse_rank already built them. A step's GPU busy time is the busy union clipped
    to its window; its top kernel is the kernel with the most GPU time among those the host launched
    inside the window (by launch correlation; by start time where the trace links no launches)."""
    import numpy as np
    from profilectl.analysis.steps import rank_steps
    steps = rank_steps(t)
    if not steps:
        return [], ""
    busy_blocks = Blocks(blocks if blocks is not None else busy_union(t))
    kernels = t.kind == KERNEL
    collective = collective_mask(t)
    comm_blocks = Blocks(union(t.start[kernels & collective], t.end[kernels & collective]))
    launched = launch_times(t)[kernels]  # when each kernel was launched (its start where no launch is linked)
    order = np.argsort(launched, kind="stable")
    k_launched, k_name = launched[order], t.name[kernels][order]
    k_duration = (t.end[kernels] - t.start[kernels])[order]
    rows = []
    for position, window in enumerate(steps.windows):
        low, high = window.start, window.end
        busy = busy_blocks.within(low, high)
        first, stop = np.searchsorted(k_launched, [low, high], side="left")
        top, top_ns = None, 0
        if stop > first:
            per_name = np.bincount(k_name[first:stop], weights=k_duration[first:stop], minlength=len(t.names))
            best = int(per_name.argmax())
            top, top_ns = t.names[best], int(per_name[best])
        comm = comm_blocks.within(low, high)
        phase = steps.phase(position)
        rows.append(StepRow(step=window.step, name=window.name, wall_ns=window.wall_ns, gpu_busy_ns=busy,
                            busy_percent=100.0 * busy / window.wall_ns if window.wall_ns > 0 else 0.0, top_kernel=top,
                            top_kernel_ns=top_ns, communication_percent=100.0 * comm / busy if busy else 0.0,
                            warmup=phase == "warmup", rank=t.rank, last=phase == "last"))
    return rows, steps.source


def launch_times(t: RankTimeline) -> "NDArray[np.int64]":
    """When each GPU activity was launched: its launch call's start where the trace links it by
    correlation id, else the activity's own start (the one rule of "what a window launched")."""
    import numpy as np
    if not len(t.api_correlation) or not len(t.correlation):
        return t.start
    order = np.argsort(t.api_correlation, kind="stable")
    keys = t.api_correlation[order]
    at = np.clip(np.searchsorted(keys, t.correlation), 0, len(keys) - 1)
    linked = (np.asarray(t.correlation) >= 0) & (keys[at] == t.correlation)
    return np.where(linked, t.api_start[order][at], t.start)


def _merge_steps(per_rank: list[list[StepRow]]) -> list[StepRow]:
    """A job's step is as slow as its slowest rank: per step number, that rank's row."""
    by_step: dict[int, StepRow] = {}
    for rows in per_rank:
        for row in rows:
            have = by_step.get(row.step)
            if have is None or row.wall_ns > have.wall_ns:
                by_step[row.step] = row
    return [by_step[n] for n in sorted(by_step)]


# ---------------------------------------------------------------- all ranks


def rank_piece(t: RankTimeline) -> RankPiece:
    row, gaps, blocks = analyse_rank(t)
    steps, source = steps_of(t, blocks)
    return RankPiece(row=row, gaps=tuple(gaps), blocks=blocks, steps=tuple(steps), step_source=source)




def analyse(parts: Sequence[RankTimeline]) -> TimelineAnalysis | None:
    timelines = [t for t in combine(parts) if not t.empty]
    timelines.sort(key=lambda t: rank_order(t.rank, t.host))
    pieces = []
    for t in timelines:
        pieces.append(rank_piece(t))
        if len(timelines) > 1:  # several ranks' orders would add up: the idle analysis makes each again
            t.release_order()
    return analyse_pieces(pieces)


def analyse_pieces(pieces: Sequence[RankPiece]) -> TimelineAnalysis | None:
    """The job's timeline from its ranks' pieces, in rank order (rank_order)."""
    if not pieces:
        return None
    rows, curves, steps, sources = [], [], [], []
    gaps: list[Gap] = []
    for piece in pieces:
        rows.append(piece.row)
        gaps += piece.gaps
        curves.append((piece.row.rank, piece.blocks))
        if piece.steps:
            steps.append(list(piece.steps))
            sources.append(piece.step_source)
    merged_steps = _merge_steps(steps)
    slowest = tuple(r.step for r in sorted((r for r in merged_steps if r.steady), key=lambda r: -r.wall_ns)[:3])
    gaps.sort(key=lambda g: -g.duration_ns)
    busy = [r.busy_percent for r in rows]
    ranks_busy = RanksBusy(ranks=len(rows), mean_percent=sum(busy) / len(busy), min_percent=min(busy),
                           max_percent=max(busy)) if len(rows) > 1 else None
    return TimelineAnalysis(merged=_merged(rows, [blocks for _, blocks in curves]),
                            ranks=tuple(rows) if len(rows) > 1 else (), ranks_busy=ranks_busy,
                            gaps=tuple(gaps[:TOP_GAPS]), steps=tuple(merged_steps), slowest_steps=slowest,
                            step_source=sources[0] if sources else "",
                            curves=_curves_on_one_axis(curves))


def _union_of_ranks(blocks: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]], chunk_rows: int = CHUNK_ROWS
                    ) -> UnionStream:
    """The union of several ranks' busy blocks (each sorted), window by window of start time, nothing
    kept but its figures: every rank's every step-th start bounds a window, so a window holds at
    most `chunk_rows` blocks whatever the ranks' lengths."""
    import numpy as np
    parts = [(s, e) for s, e in blocks if len(s)]
    union = UnionStream(keep=False, counts_gaps=True)
    if not parts:
        return union
    step = max(1, chunk_rows // len(parts))
    bounds = sorted_distinct(np.concatenate([s[::step] for s, _ in parts]))
    edges = [None, *bounds[1:].tolist(), None]
    for low, high in zip(edges, edges[1:]):
        pieces = [(s[a:b], e[a:b]) for s, e in parts
                  for a, b in [(0 if low is None else int(np.searchsorted(s, low, side="left")),
                                len(s) if high is None else int(np.searchsorted(s, high, side="left")))] if b > a]
        if not pieces:
            continue
        start = np.concatenate([p[0] for p in pieces])
        end = np.concatenate([p[1] for p in pieces])
        order = np.argsort(start, kind="stable")
        union.add(start[order], end[order])
    return union


def _merged(rows: list[TimelineRow],
            blocks: list[tuple["NDArray[np.int64]", "NDArray[np.int64]"]] | None = None) -> TimelineRow:
    """All ranks together. Times of the job (span, busy, idle, gaps) are unions on the ranks' clock,
    never sums: two ranks of 1.23 s each make a job of about 1.23 s, busy while any GPU is busy.
    (Ranks of one host share its clock; ranks of several hosts are compared on their own clocks,
    which NTP keeps within milliseconds.) GPU-time totals (compute, communication, copies) add up."""
    import numpy as np
    if len(rows) == 1:
        return rows[0]

    def total(name: str) -> int:
        return sum(int(getattr(r, name)) for r in rows)
    comm, hidden = total("communication_ns"), total("hidden_communication_ns")
    if blocks:
        union = _union_of_ranks(blocks)
        span = union.open[1] - union.first if union.open is not None and union.first is not None else 0
        busy, gaps, gap_total, largest = union.length, union.gaps, union.gap_total, union.largest_hole
    else:
        span, busy = total("span_ns"), total("busy_ns")
        gaps, gap_total, largest = total("gaps"), total("gap_total_ns"), max(r.largest_gap_ns for r in rows)
    kernel_time = sum(r.compute_ns + r.communication_ns for r in rows)
    short_time = sum(r.launch.short_kernel_percent * (r.compute_ns + r.communication_ns) / 100.0 for r in rows)
    delays = [r.launch.launch_delay_mean_ns for r in rows if r.launch.launch_delay_mean_ns is not None]
    depths = [r.launch.queue_depth_mean for r in rows if r.launch.queue_depth_mean is not None]
    maxima = [r.launch.queue_depth_max for r in rows if r.launch.queue_depth_max is not None]
    launch = LaunchStats(short_kernel_percent=100.0 * short_time / kernel_time if kernel_time else 0.0,
                         short_kernels=sum(r.launch.short_kernels for r in rows),
                         short_kernel_basis=rows[0].launch.short_kernel_basis,
                         launch_call_ns=sum(r.launch.launch_call_ns for r in rows),
                         launch_delay_mean_ns=sum(delays) / len(delays) if delays else None,
                         queue_depth_mean=sum(depths) / len(depths) if depths else None,
                         queue_depth_max=max(maxima) if maxima else None)
    busy_percent = 100.0 * busy / span if span else 0.0
    return TimelineRow(
        rank="any GPU", host=None, span_ns=span, busy_ns=busy, idle_ns=span - busy, busy_percent=busy_percent,
        gaps=gaps, gap_total_ns=gap_total, largest_gap_ns=largest,
        concurrent_ns=total("concurrent_ns"), max_concurrency=max(r.max_concurrency for r in rows),
        streams=total("streams"), compute_ns=total("compute_ns"), communication_ns=comm,
        hidden_communication_ns=hidden, hidden_communication_percent=100.0 * hidden / comm if comm else None,
        memory_ns=total("memory_ns"), launch=launch, launch_bound=(verdict := launch_verdict(busy_percent, launch, busy))[0],
        verdict=verdict[1])
