"""torch.profiler: traces and operator/kernel tables for PyTorch workloads on ROCm, CUDA or CPU.

The workload's own interpreter runs torch_wrapper.py (a standalone script, so profilectl need not be
importable there), which runs the user's script or module under torch.profiler and exports a
Chrome trace that opens in Perfetto.
"""

from __future__ import annotations

from pathlib import Path

from profilectl.backends.base import Backend, Job, Step
from profilectl.facts import Facts, Verdict
from profilectl.formats.torch_trace import ChromeTraceReader
from profilectl.request import Request

WRAPPER = Path(__file__).with_name("torch_wrapper.py")
TRACE = "torch_trace.json"


class TorchProfiler(Backend):
    name = "torch"
    services = frozenset({"trace", "profile"})
    readers = (ChromeTraceReader(),)

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if not request.is_python:
            return Verdict(False, "the workload is not a Python program, so torch.profiler cannot wrap it")
        if not facts.torch.version:
            return Verdict(False, "PyTorch is not installed for the workload's Python", "pip install torch")
        where = {"rocm": "ROCm GPU", "cuda": "CUDA GPU", "cpu": "CPU only"}.get(facts.torch.backend or "", "?")
        return Verdict(True, f"torch.profiler (PyTorch {facts.torch.version}, {where})")

    def traces_gpu(self, facts: Facts) -> bool:
        return facts.torch.backend in ("rocm", "cuda")

    def steps(self, job: Job) -> tuple[Step, ...]:
        python, *rest = job.request.workload
        argv = (python, str(WRAPPER), "--out", str(job.raw_dir / TRACE), "--", *rest)
        return (Step(argv=argv, label=self.name),)
