"""torch.profiler: traces and operator/kernel tables for PyTorch workloads on ROCm, CUDA or CPU.

The workload runs as the user wrote it, launcher included: profilectl's start-up hook
(rank_startup/sitecustomize.py, on PYTHONPATH) starts torch.profiler in every rank the launcher
starts (torchrun's workers, mpirun's or srun's tasks, or the one process of a plain run) once it
imports torch, and each rank exports its own Chrome trace, named by host, rank and pid. --steps A:B
becomes torch.profiler's schedule, stepped at each optimizer.step() (or profilectl.step()).
"""

from __future__ import annotations

import os
from pathlib import Path

from profilectl.backends.base import Backend, Job, Step, rank_hook_env, unsupported
from profilectl.facts import Facts, Torch, Verdict
from profilectl.formats.rank_status import RankStatusReader
from profilectl.formats.torch_trace import ChromeTraceReader
from profilectl.launchers import interpreter
from profilectl.probe import sources
from profilectl.probe.machine import Machine
from profilectl.request import Request


def workload_torch(facts: Facts, request: Request) -> Torch:
    """PyTorch as the workload's own interpreter has it: the probe looked at `python3` on PATH,
    but `/usr/bin/python3 train.py` or a torchrun of another environment may differ."""
    launch = request.launch
    named = launch.launcher_argv[0] if launch.launcher == "torchrun" else launch.program[0] if launch.program else ""
    if named in ("python3", "python"):
        return facts.torch  # the interpreter the probe looked at: python3 on PATH
    python = interpreter(launch)
    probed = facts.torch.python
    # the same path, not the same binary: a virtual environment's python links to the system one
    # but sees other packages (Debian's python3-torch is not in a venv made without system packages)
    if python is None or (probed and os.path.abspath(python) == os.path.abspath(probed)):
        return facts.torch
    return sources.torch(Machine(), python)


class TorchProfiler(Backend):
    name = "torch"
    services = frozenset({"trace", "profile"})
    readers = (ChromeTraceReader(), RankStatusReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if not request.is_python:
            return Verdict(False, "the workload's processes are not Python programs, so torch.profiler cannot run "
                           "inside them")
        torch = workload_torch(facts, request)
        if not torch.version:
            return Verdict(False, f"PyTorch is not installed for the workload's Python ({torch.python or 'python3'})",
                           "pip install torch")
        where = {"rocm": "ROCm GPU", "cuda": "CUDA GPU", "cpu": "CPU only"}.get(torch.backend or "", "?")
        ranks = f", every rank {request.launch.launcher} starts" if request.launch.multi_rank else ""
        return Verdict(True, f"torch.profiler (PyTorch {torch.version}, {where}{ranks})")

    def traces_gpu(self, facts: Facts) -> bool:
        return facts.torch.backend in ("rocm", "cuda")

    def steps(self, job: Job) -> tuple[Step, ...]:
        bounds = job.request.bounds
        for option, value in (("--kernel", bounds.kernel), ("--exclude-kernel", bounds.exclude_kernel),
                              ("--launch-skip", bounds.launch_skip), ("--launch-count", bounds.launch_count),
                              ("--range", bounds.nvtx_range)):
            if value is not None:
                raise unsupported("torch.profiler", option, "it records every kernel of the profiled steps; bound "
                                  "it with --steps, or use rocprofv3 / Nsight Compute")
        if bounds.profiler_args:
            raise unsupported("torch.profiler", "--profiler-args", "it is started inside the workload, not as a "
                              "command")
        return (Step(argv=job.request.workload, label=self.name),)

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        env.update(rank_hook_env(job, torch_out=Path(job.raw_dir)))
        return env
