"""torch.profiler: traces and operator/kernel tables for PyTorch workloads on ROCm, CUDA or CPU.

The workload's own interpreter runs torch_wrapper.py (a standalone script, so profilectl need not be
importable there), which runs the user's script or module under torch.profiler and exports a
Chrome trace that opens in Perfetto.
"""

from __future__ import annotations

from pathlib import Path

from profilectl.backends.base import Backend, Collected, Step, StepResult, read_outputs
from profilectl.probe.report import EnvReport, Verdict
from profilectl.request import Request

WRAPPER = Path(__file__).with_name("torch_wrapper.py")
TRACE = "torch_trace.json"


class TorchProfiler(Backend):
    name = "torch"
    services = frozenset({"trace", "profile"})

    def available(self, env: EnvReport, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if not request.is_python:
            return Verdict(False, "the workload is not a Python program, so torch.profiler cannot wrap it")
        if not env.torch.version:
            return Verdict(False, "PyTorch is not installed for the workload's Python", "pip install torch")
        where = {"rocm": "ROCm GPU", "cuda": "CUDA GPU", "cpu": "CPU only"}.get(env.torch.backend or "", "?")
        return Verdict(True, f"torch.profiler (PyTorch {env.torch.version}, {where})")

    def traces_gpu(self, env: EnvReport) -> bool:
        return env.torch.backend in ("rocm", "cuda")

    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        python, *rest = request.workload
        argv = [python, str(WRAPPER), "--out", str(raw_dir / TRACE), "--", *rest]
        return [Step(argv=argv, label=self.name)]

    def collect(self, raw_dir: Path, request: Request, results: list[StepResult]) -> Collected:
        return read_outputs(raw_dir)
