"""Nsight Compute (ncu) for hardware counters on NVIDIA GPUs.

`ncu --metrics a,b --csv` works as root in a container with SYS_ADMIN; without permission it fails
with ERR_NVGPUCTRPERM. --target-processes all follows child processes (python launchers, MPI).
"""

from __future__ import annotations

from pathlib import Path

from profilectl.backends.base import Backend, Collected, Step, StepResult, read_outputs
from profilectl.formats import ncu as reader
from profilectl.probe.report import EnvReport, Verdict
from profilectl.request import Request

OUTPUT = "ncu_metrics.csv"


class NsightCompute(Backend):
    name = "ncu"
    tool_name = "ncu"
    services = frozenset({"counters"})
    is_profiler = True
    vendor = "nvidia"

    def available(self, env: EnvReport, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(env)):
            return refusal
        if self.tool(env) is None:
            return Verdict(False, "ncu (Nsight Compute) not found",
                           "install Nsight Compute, or add /opt/nvidia/nsight-compute/<version> to PATH")
        if (refusal := self.counter_gate(env)):
            return refusal
        return Verdict(True, f"Nsight Compute {self.tool(env).version or ''}".strip())

    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        metrics = ",".join(request.counters)
        argv = [self.tool(env).path, "--target-processes", "all", "--metrics", metrics, "--csv",
                "--log-file", str(raw_dir / OUTPUT), *request.workload]
        return [Step(argv=argv, label=self.name)]

    def list_counters_argv(self, env: EnvReport) -> list[str]:
        return [self.tool(env).path, "--query-metrics"]

    def parse_counter_list(self, output: str) -> set[str]:
        return reader.available_metrics(output)

    def counter_key(self, name: str) -> str:
        return reader.metric_base(name)  # --query-metrics lists bases; .sum/.avg/.pct roll up

    def collect(self, raw_dir: Path, request: Request, results: list[StepResult]) -> Collected:
        return read_outputs(raw_dir)
