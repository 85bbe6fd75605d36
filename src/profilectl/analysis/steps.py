"""Steps: the one definition of a step on a rank's timeline (docs/definitions.md, "Step").

A step is one iteration of the workload's loop, marked by the profiler's step ranges
(torch.profiler's `ProfilerStep#N`, the start-up hook's marks, `--step-mark NAME` ranges, a
jax.profiler step annotation, NVTX ranges named like them). Its window is where the host ran that
iteration: the host-side range. The GPU-side copies of those ranges (torch 2.x's
`gpu_user_annotation`) are used only where they are real spans of the step's work and the host side
does not mark as many steps: on ROCm, PyTorch's GPU-side `ProfilerStep#N` are markers of a few
microseconds, not the step (a 16 ms step shown as 17 µs), and torch 2.11 on CUDA writes one GPU-side
range for the first step alone.

Everything per step is measured inside that window: the GPU's busy time is the union of its
activity clipped to the window (before the first and after the last GPU activity of a step the GPU
is idle, not busy); what a step *launched* (its kernels, for `--steps`, `--range` and the top
kernel) is what the host launched inside the window, by launch correlation.

Where the trace marks no steps at all, a training loop's iterations are its steps: each
`enumerate(DataLoader)#...` range (the fetch of the next batch, one per iteration of `for batch in
loader`) starts one, which lasts until the next starts; the last one until the rank's last GPU
activity ends.

Phases: the first min(`warmup_steps`, steps // 4) steps are warm-up, and at least the first of
three or more (profiling/verdicts.yaml); the
last step is apart when there are two or more (a profiler stopped at the program's end closes it
there); the steps in between are the steady state. One step alone is its own steady state.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from profilectl.model.timeline import Marker, RankTimeline
    from profilectl.formats.tables import HookSteps

HOST_SIDE = "host-side step ranges"
LOOP_ITERATIONS = "DataLoader iterations (the trace marks no steps)"
LOOP_MARK = re.compile(r"^enumerate\(DataLoader\)#")
GPU_SIDE = "GPU-side step ranges (the host side marks fewer steps)"
# A GPU-side range shorter than this share of its host-side step is a marker, not the step's span
# (ROCm's ProfilerStep#N on the GPU: 16-18 µs against 16 ms steps).
REAL_SPAN_SHARE = 0.1


@dataclass(frozen=True)
class StepWindow:
    """One step: its number, the name it was marked with, and its window on the rank's clock (ns)."""
    step: int
    name: str
    start: int
    end: int

    @property
    def wall_ns(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Steps:
    """A rank's steps in number order, where they came from, and how many are warm-up."""
    windows: tuple[StepWindow, ...] = ()
    source: str = ""
    warmup: int = 0

    def __bool__(self) -> bool:
        return bool(self.windows)

    def phase(self, position: int) -> str:
        """warmup, steady or last, of the step at this position."""
        if position < self.warmup:
            return "warmup"
        return "last" if position == len(self.windows) - 1 and len(self.windows) > 1 else "steady"

    @property
    def steady(self) -> tuple[StepWindow, ...]:
        return tuple(w for i, w in enumerate(self.windows) if self.phase(i) == "steady")

    def numbers(self) -> str:
        """The steps marked, as a user would write them: '10-19', or '3, 5, 9'."""
        numbers = [w.step for w in self.windows]
        if not numbers:
            return "none"
        if numbers == list(range(numbers[0], numbers[-1] + 1)):
            return f"{numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])
        return ", ".join(map(str, numbers))


def warmup_steps() -> int:
    from profilectl.analysis.idle import rules
    return int(rules()["warmup_steps"])


def _by_number(markers: Sequence["Marker"]) -> dict[int, StepWindow]:
    """Step ranges by number; a step split in pieces (torch splits a GPU-side range per stream) spans them all."""
    found: dict[int, StepWindow] = {}
    for marker in markers:
        number = marker.name.rsplit("#", 1)[-1]
        if not number.isdigit():
            continue
        step = int(number)
        have = found.get(step)
        found[step] = StepWindow(step, marker.name, marker.start, marker.end) if have is None else \
            StepWindow(step, have.name, min(have.start, marker.start), max(have.end, marker.end))
    return found


def _real_spans(gpu: dict[int, StepWindow], host: dict[int, StepWindow]) -> bool:
    """GPU-side ranges that span the step's work, not markers: as long as a tenth of their host step
    (median over the steps both sides mark); with no host side to compare, taken as spans."""
    both = [(gpu[n].wall_ns, host[n].wall_ns) for n in gpu if n in host and host[n].wall_ns > 0]
    if not both:
        return True
    return statistics.median(g for g, _ in both) >= REAL_SPAN_SHARE * statistics.median(h for _, h in both)


def steps_of(markers: Sequence["Marker"], warmup_limit: int | None = None) -> Steps:
    """The rank's steps from its step marks (see the module)."""
    host = _by_number([m for m in markers if not m.on_gpu])
    gpu = _by_number([m for m in markers if m.on_gpu])
    if gpu and len(gpu) > len(host) and _real_spans(gpu, host):
        chosen, source = gpu, GPU_SIDE if host else "GPU-side step ranges (the trace marks no host side)"
    elif host:
        chosen, source = host, HOST_SIDE
    else:
        return Steps()
    windows = tuple(chosen[n] for n in sorted(chosen))
    limit = warmup_steps() if warmup_limit is None else warmup_limit
    return Steps(windows=windows, source=source, warmup=warmup_count(len(windows), limit))


def warmup_count(steps: int, limit: int) -> int:
    """The first min(limit, steps // 4) steps, and at least the first of three or more: the first step
    pays for the CUDA context, allocator growth and autotuning even in a short capture."""
    return min(limit, max(steps // 4, 1 if steps >= 3 else 0))


def rank_steps(t: "RankTimeline", warmup_limit: int | None = None) -> Steps:
    """A rank's steps: its step marks, else its DataLoader iterations (see the module)."""
    found = steps_of(t.markers, warmup_limit)
    host = t.host_activity
    if found or host is None or not len(host.start) or t.empty:
        return found
    import numpy as np
    from profilectl.model.timeline import HOST_ANNOTATION
    ids = [i for i, name in enumerate(host.names) if LOOP_MARK.match(name)]
    if not ids:
        return found
    mask = np.isin(host.name, ids) & (host.category == HOST_ANNOTATION)
    starts = sorted(set(host.start[mask].tolist()))
    last_end = int(t.end.max())
    bounds = starts + [last_end] if last_end > starts[-1] else starts
    if len(bounds) < 3:  # two iterations at least: one alone says nothing a whole-run verdict does not
        return found
    windows = tuple(StepWindow(i, f"iteration#{i}", a, b) for i, (a, b) in enumerate(zip(bounds, bounds[1:])))
    limit = warmup_steps() if warmup_limit is None else warmup_limit
    return Steps(windows=windows, source=LOOP_ITERATIONS, warmup=warmup_count(len(windows), limit))


@dataclass(frozen=True)
class ProfilerCost:
    """What the profiler itself adds to a step: the steps it recorded against the other steps of the
    same run (profilectl's start-up hook marks every step, inside the window and outside it), the
    median over every rank's steps."""
    profiled_ns: int
    unprofiled_ns: int
    profiled_steps: int
    unprofiled_steps: int

    @property
    def added_ns(self) -> int:
        return self.profiled_ns - self.unprofiled_ns

    @property
    def percent(self) -> float:
        return 100.0 * self.added_ns / self.unprofiled_ns if self.unprofiled_ns else 0.0


def profiler_cost(ranks: "Sequence[HookSteps]", warmup_limit: int | None = None) -> ProfilerCost | None:
    """The profiler's cost per step, from the hook's step ends (None: fewer than two steps on either
    side). A step lasts from the previous step's end to its own; the warm-up steps are left out, and
    so are the steps at the window's edges (the one before it, which runs the profiler's warm-up,
    its first and last, and the one after, which may pay its stop)."""
    limit = warmup_steps() if warmup_limit is None else warmup_limit
    inside: list[int] = []
    outside: list[int] = []
    for rank in ranks:
        ends = rank.step_ends_ns
        first, end = rank.profiled
        edges = {first - 1, first, end - 1, end}
        warm = max(warmup_count(len(ends), limit), 1)
        for step in range(warm, len(ends)):
            if step in edges:
                continue
            (inside if first <= step < end else outside).append(ends[step] - ends[step - 1])
    if len(inside) < 2 or len(outside) < 2:
        return None
    return ProfilerCost(profiled_ns=int(statistics.median(inside)), unprofiled_ns=int(statistics.median(outside)),
                        profiled_steps=len(inside), unprofiled_steps=len(outside))
