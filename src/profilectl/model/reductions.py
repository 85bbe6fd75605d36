"""What the job's analyses keep of each rank, and their results: a rank's timeline piece, its idle
time by cause, its waits in collectives (a rank's partial stores these; read/partials.py) and the
straggler judged from them. Frozen values; nothing here imports anything above the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from profilectl.model.timeline import Gap, HtaStreamIdle, StepRow, TimelineRow, rank_order

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True)
class IdleCause:
    """Idle time of one cause in one scope (a rank's steady state, its whole run, the job)."""
    cause: str  # the rule's key: synchronisation, communication, input, compile, launch, host, ...
    title: str
    idle_ns: int
    gaps: int
    share: float  # of the scope's idle time, 0..1
    activity: str | None = None  # the host event with the most time (or calls) across these gaps
    activity_ns: int = 0


@dataclass(frozen=True)
class StepIdle:
    """One step's idle time on one rank: its phase, wall time and idle time by cause."""
    step: int
    phase: str  # warmup, steady, last
    wall_ns: int
    idle_ns: int
    causes: tuple[tuple[str, int], ...]  # (cause, idle ns), largest first


@dataclass(frozen=True)
class RankIdle:
    """One rank's GPU idle time by cause: in its steady state (the verdict's basis), the run, each phase and step."""
    rank: str
    host: str | None
    span_ns: int
    idle_ns: int
    scope: str  # what `steady` covers: "steps 2-8 (steady state)" or "whole run (no step marks)"
    steady_span_ns: int
    steady_idle_ns: int
    steady: tuple[IdleCause, ...]  # the verdict's basis
    whole: tuple[IdleCause, ...]  # every gap of the run
    phases: tuple[tuple[str, int], ...]  # idle ns per phase (startup, warmup, steady, last, teardown)
    steps: tuple[StepIdle, ...] = ()
    hta: tuple[HtaStreamIdle, ...] = ()
    host_recorded: bool = True  # the trace had host activity (else causes are launch/untraced/unrecorded only)
    step_ranges: tuple[tuple[int, int, int], ...] = ()  # (step, start, end) on the rank's clock (analysis/steps.py)
    # inside the steady windows: NCCL/RCCL kernels, the part of them no compute kernel runs beside, copies
    steady_communication_ns: int = 0
    steady_exposed_communication_ns: int = 0
    steady_copy_ns: int = 0
    step_source: str = ""  # where the steps came from (analysis/steps.py)
    program: str = ""  # RankTimeline.program: what the trace says the program is

    @property
    def steady_busy_ns(self) -> int:
        return self.steady_span_ns - self.steady_idle_ns

    @property
    def steady_busy_percent(self) -> float:
        return 100.0 * self.steady_busy_ns / self.steady_span_ns if self.steady_span_ns else 0.0


@dataclass(frozen=True)
class RankStep:
    """One rank's steady step for the straggler analysis: its wall time, its time in collectives and its own work."""
    rank: str
    step: int
    wall_ns: int
    collective_ns: int  # waiting in and moving data through collectives
    own_ns: int  # the step less its collective time: the rank's own work
    end_skew_ns: int | None  # this rank's step end after the earliest rank's (same host only)


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for: its median lead per steady step, in how many steps it led, and its extra own
    time over the fastest rank's."""
    rank: str  # the rank the others wait for
    host: str | None
    lead_ns: float  # median per steady step: the others' wait less its own
    steps: int  # steady steps judged
    steps_led: int  # in how many of them it was the one waited for, by more than the noise floor
    basis: str  # "NCCL/RCCL kernels" or "host collectives (gloo/MPI)"
    fastest_own_ns: float  # median own time of the fastest rank, per step (the base of the percentage)
    percent: float  # its extra own time over the fastest rank's, relative to the fastest


@dataclass(frozen=True)
class StragglerAnalysis:
    """The straggler analysis of a job: every rank's steady steps, the straggler where one stands out (else why
    none), and the noise threshold."""
    steps: tuple[RankStep, ...]  # steady steps, every rank
    basis: str
    straggler: Straggler | None
    noise_ns: int  # the threshold a lead had to pass
    why_none: str | None = None  # when no straggler is named: why
    unit: str = "step"  # what `steps` counts: steady steps, or collective calls where no rank marks steps


@dataclass(frozen=True)
class RankWaits:
    """One rank's steady steps with the time it spent in collectives in each: all that the
    straggler analysis needs of a rank (a rank's partial keeps it; read/partials.py)."""
    rank: str
    host: str | None
    basis: str  # "NCCL/RCCL kernels", "host collectives (gloo/MPI)" or "" (none)
    steps: tuple[tuple[int, int, int, int], ...]  # (step, start, end, collective ns), steady steps only
    unit: str = "step"  # "collective": the trace marks no steps, each collective call is a unit


@dataclass(frozen=True)
class RankPiece:
    """What the job's timeline keeps of one rank: its row, gaps, busy blocks and steps. A rank's
    partial (read/partials.py) stores it, so a job merges these without its raw files."""
    row: TimelineRow
    gaps: tuple[Gap, ...]
    blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"]  # the busy union (starts, ends)
    steps: tuple[StepRow, ...]
    step_source: str


@dataclass(frozen=True)
class RankReduction:
    """One process's timeline, reduced: its timeline piece, idle breakdown and waits."""
    piece: RankPiece
    idle: RankIdle
    waits: RankWaits | None  # None: no step marks

    @property
    def order(self) -> tuple[int, str, str]:
        return rank_order(self.piece.row.rank, self.piece.row.host)
