"""A summary's per-rank rows: what the ranks table shows and what the diagnosis orders failures by."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankSummary:
    """One rank: its kernel time (total_ns; copies are in the copies table), how much of it is in
    collectives (NCCL/RCCL), its heaviest kernel."""
    rank: str
    kernels: int
    dispatches: int
    total_ns: float
    host: str | None = None
    collective_ns: float = 0.0
    collective_percent: float = 0.0
    top_kernel: str | None = None  # for a cpu-basis rank: its heaviest operator
    status: str | None = None
    basis: str = "gpu"  # gpu: kernel time; cpu: operators' self time (a rank with no GPU kernels)
    failed_unix_ns: int | None = None  # when it failed or was stopped (its status file)
    error: str | None = None
    signal: int | None = None
