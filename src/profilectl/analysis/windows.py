"""A report restricted to windows: `report --range NAME` (the ranges of a user annotation: torch's
record_function / user_annotation, ProfilerStep, ROCTx, a jax.profiler step annotation) and
`report --steps A:B` (steps A to B-1), per rank.

What has a timestamp per event is restricted: the kernels and copies (a GPU activity is in a
window when its launch call began inside it, or, where no launch is linked, when it began inside
it), the timeline, its
launch calls, host activity and step marks. The windows are then laid end to end (the time between
two windows is left out, not counted as idle). Operators, API statistics and annotations are totals
that the readers keep without their events: they stay those of the whole trace, and a note says so.
A window is a span of time on the rank: what any thread launched inside it counts (the annotation
table's "GPU launched" counts the range's own thread only: autograd's backward thread launches
outside it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from profilectl.errors import FormatError
from profilectl.model.timeline import sorted_distinct

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from profilectl.model.timeline import RankTimeline
    from profilectl.model.tables import StatsByName, Tables

Windows = list[tuple[int, int]]


@dataclass(frozen=True)
class WindowRequest:
    """The windows a report is restricted to: `--range NAME` or `--steps A:B`, with `--step-mark NAME` where such
    ranges are the steps."""
    range_name: str | None = None
    steps: tuple[int, int] | None = None  # [first, end)
    step_mark: str | None = None  # the ranges of this name are the steps (their order numbers them)

    def describe(self) -> str:
        return f"--range {self.range_name}" if self.range_name is not None else \
            f"--steps {self.steps[0]}:{self.steps[1]}" if self.steps else ""


def parse_steps(text: str) -> tuple[int, int]:
    first, sep, end = text.partition(":")
    if not sep or not first.strip().isdigit() or not end.strip().isdigit():
        raise FormatError(f"--steps expects A:B (steps A to B-1), got {text!r}")
    window = int(first), int(end)
    if window[1] <= window[0]:
        raise FormatError(f"--steps {text}: the first step must come before the end")
    return window


def merged(windows: Windows) -> Windows:
    """Overlapping or nested windows joined, in time order."""
    out: Windows = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if out and start < out[-1][1]:  # touching windows (one step ends as the next begins) stay apart
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _named(name: str, wanted: str) -> bool:
    """A range's name, or a step mark's name without its number (ProfilerStep#3 for ProfilerStep)."""
    return name == wanted or name.rsplit("#", 1)[0] == wanted


def timeline_windows(t: "RankTimeline", request: WindowRequest) -> Windows:
    """The rank's windows from its own timeline: its steps (analysis/steps.py: the host side's
    ranges, not the GPU side's markers), and the host's annotation ranges."""
    from profilectl.analysis.steps import rank_steps
    from profilectl.model.timeline import HOST_ANNOTATION
    steps = rank_steps(t)
    if request.steps is not None:
        first, end = request.steps
        return [(w.start, w.end) for w in steps.windows if first <= w.step < end]
    assert request.range_name is not None
    found = [(w.start, w.end) for w in steps.windows if _named(w.name, request.range_name)]
    host = t.host_activity
    if host is not None and request.range_name in host.names:
        index = host.names.index(request.range_name)
        mask = (host.category == HOST_ANNOTATION) & (host.name == index)
        found += list(zip(host.start[mask].tolist(), host.end[mask].tolist()))
    return found


def _inside(times: "NDArray[np.int64]", windows: Windows) -> tuple["NDArray[np.bool_]", "NDArray[np.int64]"]:
    """Which times fall in a window, and the index of that window."""
    import numpy as np
    starts = np.asarray([w[0] for w in windows], dtype=np.int64)
    ends = np.asarray([w[1] for w in windows], dtype=np.int64)
    index = np.searchsorted(starts, times, side="right") - 1
    ok = (index >= 0) & (times <= ends[np.maximum(index, 0)])
    return ok, np.maximum(index, 0)


def restrict_timeline(t: "RankTimeline", windows: Windows) -> "RankTimeline":
    """The rank's activity launched inside the windows, the windows laid end to end."""
    import numpy as np
    from profilectl.model.timeline import HostActivity, Marker, rank_timeline
    from profilectl.analysis.timeline import launch_times
    lengths = np.asarray([b - a for a, b in windows], dtype=np.int64)
    # each window moves back to where the one before it ended
    shift = np.asarray([a for a, _ in windows], dtype=np.int64) - windows[0][0] - \
        np.concatenate([[0], np.cumsum(lengths)[:-1]])
    launched = launch_times(t)
    keep, which = _inside(launched, windows)
    move = shift[which][keep]
    api_keep, api_which = _inside(t.api_start, windows)
    api_move = shift[api_which][api_keep]
    markers = []
    for m in t.markers:
        for k, (a, b) in enumerate(windows):
            low, high = max(m.start, a), min(m.end, b)
            if high > low:
                markers.append(Marker(m.name, int(low - shift[k]), int(high - shift[k]), m.on_gpu))
    host = t.host_activity
    if host is not None:
        host_keep, host_which = _inside(host.start, windows)
        host_move = shift[host_which][host_keep]
        host = HostActivity(start=host.start[host_keep] - host_move, end=host.end[host_keep] - host_move,
                            category=host.category[host_keep], name=host.name[host_keep],
                            thread=host.thread[host_keep], names=host.names, threads=host.threads)
    return rank_timeline(t.rank, t.host, start=t.start[keep] - move, end=t.end[keep] - move, stream=t.stream[keep],
                         kind=t.kind[keep], name=t.name[keep], correlation=np.asarray(t.correlation)[keep],
                         names=t.names, streams=t.streams, api_start=t.api_start[api_keep] - api_move,
                         api_end=t.api_end[api_keep] - api_move, api_correlation=t.api_correlation[api_keep],
                         markers=markers, host_activity=host, program=t.program)


def with_step_marks(tables: "Tables", name: str, extra: dict[str, Windows] | None = None) -> "Tables":
    """The ranges named `name` (outermost ones, in time order) as the steps of each rank:
    `<name>#0`, `<name>#1` ... replace the trace's own step marks, for the per-step rows, the
    diagnosis and `--steps A:B`."""
    from profilectl.model.timeline import Marker
    timelines = []
    found = 0
    for t in tables.timelines:
        windows = merged(timeline_windows(t, WindowRequest(range_name=name)) + (extra or {}).get(t.rank, []))
        found += len(windows)
        markers = tuple(Marker(f"{name}#{i}", a, b, False) for i, (a, b) in enumerate(windows))
        timelines.append(dataclasses.replace(t, markers=markers) if windows else t)
    if not found:
        raise FormatError(f"report --step-mark {name}: no range named {name!r} in these traces")
    note = f"--step-mark {name}: the {found} range(s) of that name are the steps, numbered from 0 in time order"
    return dataclasses.replace(tables, timelines=tuple(timelines), notes=tables.notes + (note,))


def stats_by_kind(t: "RankTimeline") -> dict[int, StatsByName]:
    """A timeline's kernels (KERNEL) and copies and memsets (COPY), per name: the tables of those
    events alone (a window's, a rank's)."""
    import numpy as np
    from profilectl.model.timeline import COPY, KERNEL
    from profilectl.model.tables import KernelStats
    durations = t.end - t.start
    per_kind: dict[int, StatsByName] = {}
    for kind in (KERNEL, COPY):
        mask = t.kind == kind
        stats: StatsByName = {}
        for index in sorted_distinct(t.name[mask]).tolist():
            values = durations[mask & (t.name == index)]
            stats[t.names[index]] = KernelStats.from_integer_sums(
                len(values), int(values.sum()), int((values * values).sum()), int(values.min()), int(values.max()))
        per_kind[kind] = stats
    return per_kind


def restrict(tables: "Tables", request: WindowRequest, extra: dict[str, Windows] | None = None) -> "Tables":
    """Tables whose kernels, copies, ranks and timelines are those of the windows; `extra`: windows
    per rank that the timelines do not carry (ROCTx ranges of a marker trace)."""
    from profilectl.model.timeline import COPY, KERNEL
    from profilectl.formats import ranks
    from profilectl.model.tables import merge_stats
    if not tables.timelines:
        raise FormatError(f"report {request.describe()}: these files hold no timeline (no per-event timestamps: "
                          "counters, pre-aggregated statistics); nothing to restrict")
    kept: list[RankTimeline] = []
    kernels: StatsByName = {}
    copies: StatsByName = {}
    rows = []
    total_windows = 0
    for t in tables.timelines:
        windows = merged(timeline_windows(t, request) + (extra or {}).get(t.rank, []))
        if not windows:
            continue
        total_windows += len(windows)
        part = restrict_timeline(t, windows)
        kept.append(part)
        per_kind = stats_by_kind(part)
        kernels = merge_stats(kernels, per_kind[KERNEL])
        copies = merge_stats(copies, per_kind[COPY])
        rows.append(ranks.rank_row(t.rank, t.host, per_kind[KERNEL]))
    if not kept:
        what = f"no range named {request.range_name!r}" if request.range_name is not None else \
            f"no step {request.steps[0]} to {request.steps[1] - 1} marked" if request.steps else "no window"
        raise FormatError(f"report {request.describe()}: {what} in these traces; {_what_there_is(tables)}")
    if not any(len(part.start) for part in kept):
        raise FormatError(f"report {request.describe()}: the {total_windows} window(s) of {len(kept)} rank(s) launched "
                          f"no GPU activity; {_what_there_is(tables)}")
    note = (f"{request.describe()}: kernels, copies and the timeline are those launched inside {total_windows} "
            f"window(s) of {len(kept)} rank(s), laid end to end; operators, API calls and annotations are of the "
            "whole trace")
    return dataclasses.replace(tables, kernels=kernels, memory_copies=copies, timelines=tuple(kept),
                               ranks=tuple(rows) if tables.ranks else (),
                               notes=tables.notes + (note,))


def _what_there_is(tables: "Tables") -> str:
    """What the traces do have to select: their steps and their most frequent range names."""
    from collections import Counter
    from profilectl.analysis.steps import rank_steps
    from profilectl.model.timeline import HOST_ANNOTATION
    said = []
    for t in tables.timelines[:1]:  # the first rank speaks for the others
        steps = rank_steps(t)
        said.append(f"rank {t.rank}'s steps are {steps.numbers()}" + (f" ({steps.source})" if steps else ""))
        host = t.host_activity
        if host is not None and len(host.start):
            named = Counter(host.names[i] for i in host.name[host.category == HOST_ANNOTATION].tolist())
            ranges = [n for n, _ in named.most_common(6) if not n.startswith("ProfilerStep#")]
            if ranges:
                said.append("its ranges include " + ", ".join(repr(n) for n in ranges))
    return "; ".join(said) or "the traces mark no steps or ranges"


def roctx_windows(files: Sequence[str], name: str | None) -> dict[str, Windows]:
    """ROCTx ranges of that name in rocprofv3 marker traces, by rank (rocprofv3's rank names)."""
    from pathlib import Path
    if name is None:
        return {}
    from profilectl.formats import roctx, rocprofv3
    by_kind: dict[str, list[Path]] = {}
    for file in files:
        kind = rocprofv3.kind_of(Path(file).name)
        if kind is not None:
            by_kind.setdefault(kind, []).append(Path(file))
    if "marker_api_trace" not in by_kind:
        return {}
    out: dict[str, Windows] = {}
    for (rank, _host), rank_files in rocprofv3._ranks_of(by_kind).items():
        found = [(r.start, r.end) for r in roctx.ranges_of(rank_files.get("marker_api_trace", []))
                 if _named(r.name, name)]
        if found:
            out.setdefault(rank, []).extend(found)
    return out
