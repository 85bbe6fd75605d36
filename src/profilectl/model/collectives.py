"""What the NCCL/RCCL inspector plugin wrote of each collective (formats/nccl_inspector.py): its own
measurement, beside the trace's (analysis/collective_calls.py). Nothing here imports anything above it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InspectorRecord:
    """One collective on one communicator of one rank, as the inspector's JSON line says it."""
    host: str
    pid: int | None
    rank: int | None  # in the communicator ("header.rank")
    ranks: int | None  # "header.n_ranks"
    nodes: int | None  # "header.nnodes"
    communicator: str  # "header.id", the communicator's hash
    kind: str  # "coll_perf.coll": AllReduce, AllGather, ReduceScatter, ...
    sequence: int | None  # "coll_sn", the communicator's count of its collectives
    bytes: int | None  # "coll_msg_size_bytes"
    time_us: float | None  # "coll_exec_time_us"
    timing: str  # "coll_timing_source": kernel_gpu, kernel_cpu, ... ("" where not written)
    algbw_gbs: float | None  # "coll_algobw_gbs", as the inspector computed it
    busbw_gbs: float | None  # "coll_busbw_gbs"
