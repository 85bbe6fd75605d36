"""The clock offset of every host of a multi-rank job (merge-trace's pass between its two passes):
from the ends of the collectives a host shares with the reference host, paired by (step, name,
k-th within the step), clamped into the interval causality allows; else kineto's wall-clock base,
else none. report/merged_trace.py's docstring tells the method.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from profilectl.read.rank_traces import Collective, RankScan, step_markers


# ---------------------------------------------------------------- clocks
@dataclass(frozen=True)
class HostOffset:
    """One host's clock offset for merge-trace: what is added to its timestamps, how it was estimated, and how well."""
    host: str
    offset_ns: int  # added to the host's timestamps to put them on the output's clock
    basis: str  # how it was estimated, in words
    pairs: int = 0  # collectives paired with the reference host
    spread_ns: int = 0  # median absolute deviation of the pairs' estimates
    low_ns: int | None = None  # the interval causality allows (None: not bounded)
    high_ns: int | None = None


def _keyed(scan_: RankScan) -> dict[tuple[bool, int, str, int], Collective]:
    """The rank's collectives by (on the GPU, step, name, k-th of that name within the step):
    n log n in the rank's steps and collectives (each step found by bisection)."""
    gpu_steps = scan_.steps_gpu if _gpu_steps_are_spans(scan_) else scan_.steps_cpu
    step_of = {True: _step_finder(gpu_steps), False: _step_finder(scan_.steps_cpu)}
    keyed: dict[tuple[bool, int, str, int], Collective] = {}
    counts: dict[tuple[bool, int, str], int] = {}
    for c in sorted(scan_.collectives, key=lambda c: c.start):
        step = step_of[c.on_gpu](c.start)
        base = (c.on_gpu, step, c.name)
        k = counts.get(base, 0)
        counts[base] = k + 1
        keyed[base + (k,)] = c
    return keyed


def _step_finder(steps: dict[int, tuple[int, int]]) -> Callable[[int], int]:
    """t -> the step whose range holds t, a step lasting until the next one starts; -1 before the
    first (steps sorted by start once; each lookup a bisection; of steps starting together, the last
    in that order, as a scan in start order finds it)."""
    import bisect
    ordered = sorted(steps.items(), key=lambda item: item[1][0])
    starts = [start for _, (start, _) in ordered]
    numbers = [number for number, _ in ordered]

    def step_of(t: int) -> int:
        at = bisect.bisect_right(starts, t)
        return numbers[at - 1] if at else -1
    return step_of


def _host_times(scans: Sequence[RankScan]) -> dict[str, dict[tuple[bool, int, str, int], tuple[int, int, int, int]]]:
    """Per host, per collective: (median end, earliest end, latest start, earliest start) over its ranks."""
    per_host: dict[str, dict[tuple[bool, int, str, int], list[Collective]]] = {}
    for s in scans:
        for key, c in _keyed(s).items():
            per_host.setdefault(s.rank.host, {}).setdefault(key, []).append(c)
    return {host: {key: (int(statistics.median(c.end for c in cs)), min(c.end for c in cs), max(c.start for c in cs),
                         min(c.start for c in cs)) for key, cs in keys.items()} for host, keys in per_host.items()}


def estimate_offsets(scans: Sequence[RankScan]) -> dict[str, HostOffset]:
    """Each host's offset to the first rank's host (see the module's docstring)."""
    hosts = list(dict.fromkeys(s.rank.host for s in scans))
    if not hosts:
        return {}
    reference = hosts[0]
    times = _host_times(scans)
    bases = {s.rank.host: s.base_ns for s in scans if s.base_ns is not None}
    offsets = {reference: HostOffset(reference, 0, "reference")}
    ref = times.get(reference, {})
    for host in hosts[1:]:
        mine = times.get(host, {})
        common = [k for k in mine if k in ref]
        gpu = [k for k in common if k[0]]
        common = gpu or common  # NCCL/RCCL kernels' ends are sharper than the CPU ops around them
        if common:
            estimates = [ref[k][0] - mine[k][0] for k in common]
            middle = int(statistics.median(estimates))
            spread = int(statistics.median(abs(e - middle) for e in estimates))
            low = max(ref[k][2] - mine[k][1] for k in common)  # reference's last arrival before our first exit
            high = min(ref[k][1] - mine[k][2] for k in common)  # our last arrival before reference's first exit
            offset = min(max(middle, low), high) if low <= high else middle
            what = "NCCL/RCCL kernels" if gpu else "CPU-side collectives (gloo/nccl/c10d)"
            note = "" if low <= high else "; the causal bounds disagree (clock drift, or unmatched calls)"
            offsets[host] = HostOffset(host, offset, f"median of {len(common)} {what}' ends against {reference}'s, "
                                       f"within the causal bounds{note}", len(common), spread,
                                       low if low <= high else None, high if low <= high else None)
        elif host in bases and reference in bases:
            offsets[host] = HostOffset(host, bases[host] - bases[reference],
                                       f"no collective in common with {reference}: kineto's wall-clock bases "
                                       "(baseTimeNanoseconds; NTP accuracy)")
        else:
            offsets[host] = HostOffset(host, 0, f"no collective in common with {reference} and no wall-clock base: "
                                       "not shifted")
    return offsets


def _gpu_steps_are_spans(scan_: RankScan) -> bool:
    """The GPU side's step ranges are the step (analysis/steps.py's rule: real spans, and more of them)."""
    from profilectl.analysis.steps import GPU_SIDE, steps_of
    return bool(scan_.steps_gpu) and steps_of(step_markers(scan_)).source.startswith(GPU_SIDE.split(" (")[0])
