"""Collectives: the one definition of what is communication (docs/definitions.md, "Collective").

- On the GPU, a collective's kernel is an NCCL or RCCL kernel, known by its name (`ncclDevKernel_*`,
  `ncclKernel_*`, RCCL's the same): a substring test of the lower-cased name (a case-blind regex
  search took 0.08 s over the 3,000 long template names of a 1 M-dispatch trace; this 4 ms).
- On the host, a collective is the call that runs or waits for one: gloo's, MPI's and UCC's own
  operators (`gloo:all_reduce`), c10d's collective dispatch (`c10d::allreduce_`), NCCL's host side
  (`nccl:all_reduce`) and torch's `record_param_comms` around every collective call. With NCCL the
  host call only launches; with gloo or MPI the host does the work and the GPU waits.
Every analysis that asks "is this communication" asks here: the timeline's compute/communication
split, the steps, the idle diagnosis's exposed communication, the stragglers, the ranks table and
the merged trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

GPU_WORDS = ("nccl", "rccl")
HOST_COLLECTIVE = re.compile(
    r"^(gloo|mpi|ucc|nccl):|^c10d::(all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|all_?to_?all|reduce|"
    r"gather|scatter|send|recv)|^record_param_comms", re.IGNORECASE)


def is_collective(name: str) -> bool:
    """A GPU kernel's name: NCCL's or RCCL's."""
    lowered = name.lower()
    return GPU_WORDS[0] in lowered or GPU_WORDS[1] in lowered


def collective_names(names: Sequence[str]) -> "NDArray[np.bool_]":
    """Per name id: a collective's kernel or not (one False where there are no names)."""
    import numpy as np
    return np.array([is_collective(n) for n in names] or [False], dtype=bool)


def is_host_collective(name: str) -> bool:
    """A host event's name: a call that runs or waits for a collective."""
    return bool(HOST_COLLECTIVE.search(name))


def host_collective_names(names: Sequence[str]) -> "NDArray[np.bool_]":
    import numpy as np
    return np.array([is_host_collective(n) for n in names] or [False], dtype=bool)


# What the NCCL/RCCL inspector plugin wrote of each collective (formats/nccl_inspector.py): its own
# measurement, beside the trace's (analysis/collective_calls.py).
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
