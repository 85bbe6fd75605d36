"""The job while it runs: from each rank's latest step ends and each GPU's latest telemetry row, per
rank its last steps' times and how far its step ends lag the earliest rank's, and the rank the others
wait for. Pure: values in, values out (read/live.py follows the files; report/live.py shows this).

Why the lag of step ends: a rank the others wait for ends its steps late. Where the host runs ahead
of the GPU (CUDA/HIP streams, NCCL/RCCL on the GPU), the others' hosts end each step as soon as they
have queued its work, while the late rank's host is still busy: on 2 H200s under DDP a rank sleeping
50 ms a step ended its steps 50.4 ms after the other's (median), identical ranks about 0 ms apart.
Where a collective makes every host wait inside the step (gloo on the CPU, a host synchronisation
before the step's end), the ends line up again and the lag shows only what a rank does between the
collective and its step's end: the trace's straggler analysis (analysis/stragglers.py) then says more.

Clocks: a step's duration is measured on the rank's CLOCK_MONOTONIC (end_mono_ns, immune to clock
steps); lags compare end_unix_ns across ranks, exact on one host, and across hosts only as good as
the offset between their clocks (NTP: about a millisecond on one network), which the state says.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from profilectl.analysis.rules import rules

MS = 1_000_000


@dataclass(frozen=True)
class StepMark:
    """The end of one step in one rank (its steps.jsonl line)."""
    step: int
    end_unix_ns: int  # time.time_ns(): comparable across the ranks of a host (and, within NTP, of hosts)
    end_mono_ns: int  # perf_counter_ns (CLOCK_MONOTONIC): the rank's own durations


@dataclass(frozen=True)
class RankMarks:
    """One rank's latest step ends (in step order) and the GPU it most likely uses: the
    LOCAL_RANK-th of its visible devices, the convention of torchrun's `cuda:LOCAL_RANK` (None: not
    known, the GPUs are then shown apart)."""
    rank: str
    host: str
    pid: int
    marks: tuple[StepMark, ...]
    gpu: int | None = None


@dataclass(frozen=True)
class GpuNow:
    """One GPU's latest telemetry row."""
    host: str | None
    gpu: int
    at_unix_ns: int
    busy_pct: float | None  # the source's utilisation: share of the last sample period a kernel ran
    power_w: float | None


@dataclass(frozen=True)
class RankNow:
    """One rank of a running job: its last steps' times, how late its step ends come, and its GPU's latest row."""
    rank: str
    host: str
    pid: int
    last_step: int | None  # the last step it ended
    last_end_unix_ns: int | None  # when (a rank that stopped stepping shows here: its age grows)
    step_ns: tuple[int, ...]  # its last steps' durations (at most the window), oldest first
    median_step_ns: int | None
    lag_ns: int | None  # median over the window's common steps of (its end - the earliest rank's end)
    gpu: GpuNow | None = None  # its GPU's latest row, where the rank's GPU is known


@dataclass(frozen=True)
class LiveStraggler:
    """The rank a running job waits for: how late its step ends come, over which common steps, its own step time."""
    rank: str
    host: str
    lag_ns: int
    step_ns: int  # its own median step over the window
    first_step: int  # the window's common steps, first and last
    last_step: int
    window: int

    def sentence(self) -> str:
        steps = self.last_step - self.first_step + 1
        return (f"rank {self.rank} is the one the others wait for: its steps end {self.lag_ns / MS:.1f} ms after the "
                f"earliest rank's (median of the last {steps} steps, {self.first_step} to {self.last_step}; "
                f"its step {self.step_ns / MS:.1f} ms)")


@dataclass(frozen=True)
class LiveState:
    """A running job at one moment (a line of live.jsonl): ranks, GPUs, last common step, the straggler or why none."""
    at_unix_ns: int
    ranks: tuple[RankNow, ...]  # in rank order
    gpus: tuple[GpuNow, ...]  # every GPU's latest row, in (host, index) order
    common_step: int | None  # the last step every rank has ended
    straggler: LiveStraggler | None
    verdict: str  # the straggler's sentence, or why none is named (yet)
    hosts: int = 1

    def to_dict(self) -> dict[str, Any]:
        """One line of live.jsonl: milliseconds, rounded to the microsecond."""
        def ms(ns: int | None) -> float | None:
            return None if ns is None else round(ns / MS, 3)
        straggler = self.straggler
        return {
            "at_unix_ns": self.at_unix_ns, "common_step": self.common_step,
            "ranks": [{"rank": r.rank, "host": r.host, "pid": r.pid, "last_step": r.last_step,
                       "last_end_unix_ns": r.last_end_unix_ns,
                       "step_ms": [ms(d) for d in r.step_ns], "median_step_ms": ms(r.median_step_ns),
                       "lag_ms": ms(r.lag_ns), "gpu": r.gpu.gpu if r.gpu else None,
                       "gpu_busy_pct": r.gpu.busy_pct if r.gpu else None,
                       "gpu_power_w": r.gpu.power_w if r.gpu else None} for r in self.ranks],
            "gpus": [{"host": g.host, "gpu": g.gpu, "busy_pct": g.busy_pct, "power_w": g.power_w,
                      "at_unix_ns": g.at_unix_ns} for g in self.gpus],
            "straggler": None if straggler is None else {
                "rank": straggler.rank, "host": straggler.host, "lag_ms": ms(straggler.lag_ns),
                "step_ms": ms(straggler.step_ns), "steps": [straggler.first_step, straggler.last_step],
                "window": straggler.window},
            "verdict": self.verdict}


def window_steps() -> int:
    return int(rules()["live_window_steps"])


def fewest_steps(window: int) -> int:
    """A window that is filling is judged from a majority of its steps on (3 of 5): a straggler there
    from the start is named as soon as most of the steps judged show it."""
    return window // 2 + 1


def assess(ranks: Sequence[RankMarks], gpus: Sequence[GpuNow], at_unix_ns: int) -> LiveState:
    """Per rank its last steps and lag, and the straggler (module docstring): the rank with the
    largest median lag over the last `live_window_steps` steps every rank has ended (past the first
    `warmup_steps`: start-up skews them; at least fewest_steps() of them), named when that lag is at
    least max(`live_straggler_min_ns`, `live_straggler_share` of its own median step)."""
    window, warmup = window_steps(), int(rules()["warmup_steps"])
    by_rank = sorted(ranks, key=lambda r: (_rank_key(r.rank), r.host, r.pid))
    ends = [{m.step: m for m in r.marks} for r in by_rank]
    common = sorted(set.intersection(*(set(e) for e in ends))) if ends else []
    judged = [s for s in common if s > warmup][-window:]
    lags: list[int | None] = []
    for these in ends:
        if len(by_rank) < 2 or not judged:
            lags.append(None)
            continue
        behind = [these[s].end_unix_ns - min(e[s].end_unix_ns for e in ends) for s in judged]
        lags.append(int(statistics.median(behind)))
    # each rank's GPU on its host; a single telemetry source (one run directory) is the ranks' host's
    one_host = len({g.host for g in gpus}) == 1
    gpu_at = {(None if one_host else g.host, g.gpu): g for g in gpus}
    rows = []
    for rank, these, lag in zip(by_rank, ends, lags):
        durations = _durations(these, warmup)[-window:]
        last = these[max(these)] if these else None
        rows.append(RankNow(rank=rank.rank, host=rank.host, pid=rank.pid, last_step=last.step if last else None,
                            last_end_unix_ns=last.end_unix_ns if last else None, step_ns=tuple(durations),
                            median_step_ns=int(statistics.median(durations)) if durations else None,
                            lag_ns=lag, gpu=gpu_at.get((None if one_host else rank.host, rank.gpu))
                            if rank.gpu is not None else None))
    straggler, verdict = _judge(rows, judged, window, warmup)
    hosts = len({r.host for r in by_rank})
    if hosts > 1 and lags and any(lag is not None for lag in lags):
        verdict += f" (ranks on {hosts} hosts: lags include the offset between their clocks, about 1 ms under NTP)"
    return LiveState(at_unix_ns=at_unix_ns, ranks=tuple(rows),
                     gpus=tuple(sorted(gpus, key=lambda g: (g.host or "", g.gpu))),
                     common_step=common[-1] if common else None, straggler=straggler, verdict=verdict, hosts=hosts)


def named_since(ranks: Sequence[RankMarks], rank: str) -> int | None:
    """The step from which `rank` has been named without a break: the rule applied anew at each step
    every rank ended, newest first, on the marks at hand (a poll every second sees many steps at once;
    this is the step the rule named it at, not the moment a poll saw it). None: not named now."""
    common = sorted(set.intersection(*({m.step for m in r.marks} for r in ranks))) if ranks else []
    since = None
    for step in reversed(common):
        upto = [dataclasses.replace(r, marks=tuple(m for m in r.marks if m.step <= step)) for r in ranks]
        found = assess(upto, (), 0).straggler
        if found is None or found.rank != rank:
            break
        since = step
    return since


def _judge(rows: Sequence[RankNow], judged: Sequence[int], window: int,
           warmup: int) -> tuple[LiveStraggler | None, str]:
    if not rows:
        return None, "no step ended yet"
    if len(rows) < 2:
        return None, "one rank stepping so far: no straggler to name"
    if len(judged) < fewest_steps(window):
        return None, (f"no straggler named yet: {fewest_steps(window)} steps ended by every rank are needed after "
                      f"the first {warmup} (warm-up), {len(judged)} so far")
    lagging = max(rows, key=lambda r: r.lag_ns or 0)  # a tie: the lowest rank (max keeps the first)
    lag, step = lagging.lag_ns or 0, lagging.median_step_ns
    floor, share = int(rules()["live_straggler_min_ns"]), float(rules()["live_straggler_share"])
    needed = max(floor, int(share * step)) if step else None
    if needed is None or lag < needed:
        why = f"under max({floor / MS:g} ms, {share:.0%} of its step {step / MS:.1f} ms)" if step else \
            "its step time is not known yet"
        return None, (f"no straggler: the largest lag is rank {lagging.rank}'s, {lag / MS:.1f} ms (median of the last "
                      f"{len(judged)} steps), {why}")
    found = LiveStraggler(rank=lagging.rank, host=lagging.host, lag_ns=lag, step_ns=step or 0,
                          first_step=judged[0], last_step=judged[-1], window=window)
    return found, found.sentence()


def _durations(ends: dict[int, StepMark], warmup: int) -> list[int]:
    """Each step's duration past the warm-up where the step before it is known too, oldest first
    (CLOCK_MONOTONIC)."""
    return [ends[s].end_mono_ns - ends[s - 1].end_mono_ns for s in sorted(ends) if s > warmup and s - 1 in ends]


def _rank_key(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 30, rank)


def gpu_of(local_rank: int | None, visible_devices: str | None) -> int | None:
    """The GPU index a rank most likely uses: the local_rank-th of its visible devices (their numbers;
    a list of UUIDs says nothing here), or GPU local_rank when none are listed."""
    if local_rank is None:
        return None
    if visible_devices is None:
        return local_rank
    listed = [d.strip() for d in visible_devices.split(",")]
    if local_rank < len(listed) and listed[local_rank].isdigit():
        return int(listed[local_rank])
    return None
