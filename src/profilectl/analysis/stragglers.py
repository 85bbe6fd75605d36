"""Stragglers from waiting, not from GPU time: per rank and per step, the time inside collectives
(NCCL/RCCL kernels on the GPU, or the host's collective with gloo/MPI), the rank's own time (the
step less that wait), and when each rank's step ended against the others (step-end skew, ranks of
one host only: they share its clock).

The straggler is the rank the others wait for: in each steady step, the rank with the least time
in collectives while the others wait in them; its lead is the others' median wait less its own.
It is named only when that lead is beyond noise (verdicts.yaml: `straggler_min_ns` per step, in at
least `straggler_consistency` of the steady steps), and the sentence says by how much per step.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from profilectl.analysis.idle import RankIdle, rules
from profilectl.analysis.collectives import collective_names, host_collective_names
from profilectl.analysis.intervals import Blocks, union
from profilectl.model.timeline import KERNEL, RankTimeline, combine

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray



@dataclass(frozen=True)
class RankStep:
    rank: str
    step: int
    wall_ns: int
    collective_ns: int  # waiting in and moving data through collectives
    own_ns: int  # the step less its collective time: the rank's own work
    end_skew_ns: int | None  # this rank's step end after the earliest rank's (same host only)


@dataclass(frozen=True)
class Straggler:
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
    steps: tuple[RankStep, ...]  # steady steps, every rank
    basis: str
    straggler: Straggler | None
    noise_ns: int  # the threshold a lead had to pass
    why_none: str | None = None  # when no straggler is named: why
    unit: str = "step"  # what `steps` counts: steady steps, or collective calls where no rank marks steps


def _collective_blocks(t: RankTimeline) -> tuple[tuple["NDArray[np.int64]", "NDArray[np.int64]"], str]:
    """NCCL/RCCL kernels where the rank has them, else its host collectives."""
    import numpy as np
    names = collective_names(t.names)
    gpu = (t.kind == KERNEL) & names[t.name] if len(t.name) else np.zeros(0, dtype=bool)
    if gpu.any():
        return union(t.start[gpu], t.end[gpu]), "NCCL/RCCL kernels"
    host = t.host_activity
    if host is not None and len(host.start):
        chosen = host_collective_names(host.names)[host.name]
        if chosen.any():
            return union(host.start[chosen], host.end[chosen]), "host collectives (gloo/MPI)"
    empty = np.zeros(0, dtype=np.int64)
    return (empty, empty), ""


@dataclass(frozen=True)
class RankWaits:
    """One rank's steady steps with the time it spent in collectives in each: all that the
    straggler analysis needs of a rank (a rank's partial keeps it; report/partials.py)."""
    rank: str
    host: str | None
    basis: str  # "NCCL/RCCL kernels", "host collectives (gloo/MPI)" or "" (none)
    steps: tuple[tuple[int, int, int, int], ...]  # (step, start, end, collective ns), steady steps only
    unit: str = "step"  # "collective": the trace marks no steps, each collective call is a unit


def collective_units(blocks: tuple["NDArray[np.int64]", "NDArray[np.int64]"]) -> tuple[tuple[int, int, int, int], ...]:
    """A rank that marks no steps: its k-th collective call is the k-th unit, and all of it is waiting
    or moving data (the last rank to arrive spends least in it)."""
    return tuple((k, int(s), int(e), int(e - s)) for k, (s, e) in enumerate(zip(blocks[0].tolist(), blocks[1].tolist())))


def rank_waits(t: RankTimeline, rank_idle: RankIdle) -> RankWaits | None:
    """None for a rank with neither step marks nor collectives."""
    blocks, basis = _collective_blocks(t)
    if not rank_idle.step_ranges:
        return RankWaits(rank=t.rank, host=t.host, basis=basis, steps=collective_units(blocks), unit="collective") \
            if len(blocks[0]) else None
    within = Blocks(blocks)
    steady = {s.step for s in rank_idle.steps if s.phase == "steady"}
    rows = tuple((int(step), int(start), int(end), int(within.within(start, end)) if len(blocks[0]) else 0)
                 for step, start, end in rank_idle.step_ranges if step in steady)
    return RankWaits(rank=t.rank, host=t.host, basis=basis, steps=rows)


def analyse(parts: Sequence[RankTimeline], idle: Sequence[RankIdle]) -> StragglerAnalysis | None:
    timelines = {(t.rank, t.host): t for t in combine(parts) if not t.empty}
    if len(timelines) < 2:
        return None
    waits = []
    for rank_idle in idle:
        t = timelines.get((rank_idle.rank, rank_idle.host))
        if t is not None:
            waits.append(rank_waits(t, rank_idle))
    return judge(waits)


def judge(ranks: Sequence[RankWaits | None]) -> StragglerAnalysis | None:
    """The straggler from every rank's waits (None: a rank without step marks), in rank order."""
    if len(ranks) < 2:
        return None
    r = rules()
    noise = int(r["straggler_min_ns"])
    present = [one for one in ranks if one is not None]
    units = {one.unit for one in present}
    unit = "step" if "step" in units else "collective"
    ranks = [one for one in present if one.unit == unit]  # ranks that mark steps are judged by them
    per_rank: dict[str, dict[int, RankStep]] = {}
    bases = set()
    hosts: dict[str, str | None] = {}
    ends: dict[int, dict[str, tuple[str | None, int]]] = {}
    for one in ranks:
        if one is None:
            continue
        if one.basis:
            bases.add(one.basis)
        rows = {}
        for step, start, end, wait in one.steps:
            rows[step] = RankStep(rank=one.rank, step=step, wall_ns=end - start, collective_ns=wait,
                                  own_ns=end - start - wait, end_skew_ns=None)
            ends.setdefault(step, {})[one.rank] = (one.host, end)
        per_rank[one.rank] = rows
        hosts[one.rank] = one.host
    if len(per_rank) < 2:
        return None
    common = sorted(set.intersection(*(set(rows) for rows in per_rank.values())))
    basis = " and ".join(sorted(bases)) or "no collectives"
    # step-end skew: against the earliest end among ranks of the same host
    all_steps = []
    for rank, rows in per_rank.items():
        for step in common:
            row = rows[step]
            same_host = [end for host, end in ends[step].values() if host == hosts[rank]]
            skew = ends[step][rank][1] - min(same_host) if len(same_host) > 1 else None
            all_steps.append(RankStep(row.rank, row.step, row.wall_ns, row.collective_ns, row.own_ns, skew))
    observations = len(common) * (len(per_rank) - 1)
    if observations < int(r["straggler_min_comparisons"]):
        return StragglerAnalysis(steps=tuple(all_steps), basis=basis, straggler=None, noise_ns=noise, unit=unit,
                                 why_none=f"{len(per_rank)} ranks share {len(common) or 'no'} steady step(s): "
                                          f"{observations} observation(s) of a rank waiting for another, fewer than "
                                          f"{int(r['straggler_min_comparisons'])}, cannot tell a straggler from one "
                                          "slow step")
    if not bases:
        return StragglerAnalysis(steps=tuple(all_steps), basis=basis, straggler=None, noise_ns=noise, unit=unit,
                                 why_none="no collective in the steady steps: no rank waits for another")
    leads: dict[str, list[int]] = {rank: [] for rank in per_rank}
    led: dict[str, int] = {rank: 0 for rank in per_rank}
    for step in common:
        waits = {rank: rows[step].collective_ns for rank, rows in per_rank.items()}
        least = min(waits, key=lambda k: waits[k])
        others = [w for k, w in waits.items() if k != least]
        lead = int(statistics.median(others)) - waits[least]
        leads[least].append(lead)
        if lead >= noise:
            led[least] += 1
    candidate = max(led, key=lambda k: (led[k], sum(leads[k])))
    steps = len(common)
    # the lead per step over every steady step (0 where another rank was the least waiting)
    lead_per_step = statistics.median(leads[candidate] + [0] * (steps - len(leads[candidate])))
    own = {rank: statistics.median(rows[s].own_ns for s in common) for rank, rows in per_rank.items()}
    fastest = min(own.values())
    if led[candidate] < float(r["straggler_consistency"]) * steps or lead_per_step < noise:
        return StragglerAnalysis(steps=tuple(all_steps), basis=basis, straggler=None, noise_ns=noise, unit=unit,
                                 why_none=f"no rank is waited for beyond noise: the largest lead is "
                                          f"{lead_per_step / 1e6:.2f} ms per step (rank {candidate}, {led[candidate]} "
                                          f"of {steps} steady steps), below {noise / 1e6:.1f} ms")
    straggler = Straggler(rank=candidate, host=hosts[candidate], lead_ns=float(lead_per_step), steps=steps,
                          steps_led=led[candidate], basis=basis, fastest_own_ns=float(fastest),
                          percent=100.0 * (own[candidate] - fastest) / fastest if fastest else 0.0)
    return StragglerAnalysis(steps=tuple(all_steps), basis=basis, straggler=straggler, noise_ns=noise, unit=unit)
