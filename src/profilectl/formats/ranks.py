"""Which rank (process) a file belongs to, from the names profilectl and the tools give files:

  <host>/rank<R>-<pid>_<kind>.csv   rocprofv3 under a launcher (profilectl's -o rank template)
  <host>-rank<R>-<pid>.pt.trace.json  torch.profiler in a rank (profilectl's start-up hook)
  ncu_metrics.rank<R>.csv           Nsight Compute per rank (profilectl's --log-file template)
  <host>/<pid>_<kind>.csv, <host>/<pid>_results.db   rocprofv3's default layout: no rank, a process
"""

from __future__ import annotations

import re
from pathlib import Path

from profilectl.model.tables import RankRow, StatsByName
from profilectl.model.collectives import is_collective, is_host_collective

_RANK = re.compile(r"(?:^|[-_.])rank(?P<rank>\d+)(?:-(?P<pid>\d+))?")
_PID_PREFIX = re.compile(r"^(?P<pid>\d+)_")
_TOOL_DIRS = re.compile(r"^(raw|pmc_\d+|pass_\d+|torch)$")


def identity(path: Path) -> tuple[str, str | None]:
    """(rank, host) of a file; the rank is `pid <pid>` where the file names a process, not a rank."""
    name = path.name
    match = _RANK.search(name)
    host_dir = path.parent.name if path.parent.name and not _TOOL_DIRS.match(path.parent.name) else None
    if match:
        host = name[:match.start()] if match.start() > 0 and name[match.start()] == "-" else host_dir
        return match.group("rank"), host or host_dir
    pid = _PID_PREFIX.match(name)
    if pid:
        return f"pid {pid.group('pid')}", host_dir
    return path.stem, host_dir


def rank_row(rank: str, host: str | None, kernels: StatsByName, operators: StatsByName | None = None) -> RankRow:
    """A rank's GPU time, its share in collectives, and its heaviest kernel. A rank that ran no GPU
    kernel (a CPU job, gloo) is measured by its operators' self time instead: basis "cpu"."""
    if not kernels and operators and any(s.self_total for s in operators.values()):
        own = {name: s.self_total or 0.0 for name, s in operators.items()}
        top_op = max(own.items(), key=lambda item: item[1])
        return RankRow(rank=rank, host=host, kernels=0, dispatches=sum(s.calls for s in operators.values()),
                       total_ns=sum(own.values()), basis="cpu",
                       # float throughout (0.0, not 0, where none): a rank's partial decodes it as one
                       collective_ns=float(sum(t for name, t in own.items() if is_host_collective(name))),
                       top_kernel=top_op[0], top_kernel_ns=top_op[1])
    total = sum(s.total for s in kernels.values())
    top = max(kernels.items(), key=lambda item: item[1].total, default=None)
    return RankRow(rank=rank, host=host, kernels=len(kernels), dispatches=sum(s.calls for s in kernels.values()),
                   total_ns=total, basis="gpu",
                   collective_ns=float(sum(s.total for name, s in kernels.items() if is_collective(name))),
                   top_kernel=top[0] if top else None, top_kernel_ns=top[1].total if top else 0.0)
