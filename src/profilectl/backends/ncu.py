"""Nsight Compute (ncu) for hardware counters on NVIDIA GPUs.

`ncu --metrics a,b --csv` works as root in a container with SYS_ADMIN; without permission it fails
with ERR_NVGPUCTRPERM. --target-processes all follows child processes (python launchers, MPI).
"""

from __future__ import annotations

from profilectl.backends.base import Backend, Job, Step
from profilectl.facts import Facts, Verdict
from profilectl.formats import ncu as reader
from profilectl.request import Request

OUTPUT = "ncu_metrics.csv"


class NsightCompute(Backend):
    name = "ncu"
    tool_name = "ncu"
    services = frozenset({"counters"})
    is_profiler = True
    vendor = "nvidia"
    readers = (reader.NcuCsvReader(),)

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "ncu (Nsight Compute) not found",
                           "install Nsight Compute, or add /opt/nvidia/nsight-compute/<version> to PATH")
        if (refusal := self.counter_gate(facts)):
            return refusal
        return Verdict(True, f"Nsight Compute {tool.version or ''}".strip())

    def steps(self, job: Job) -> tuple[Step, ...]:
        metrics = ",".join(job.counters.counters if job.counters else ())
        argv = (self.require_tool(job.facts).path, "--target-processes", "all", "--metrics", metrics, "--csv",
                "--log-file", str(job.raw_dir / OUTPUT), *job.request.workload)
        return (Step(argv=argv, label=self.name),)

    def list_counters_argv(self, facts: Facts) -> list[str]:
        return [self.require_tool(facts).path, "--query-metrics"]

    def parse_counter_list(self, output: str) -> set[str]:
        return reader.available_metrics(output)

    def counter_key(self, name: str) -> str:
        return reader.metric_base(name)  # --query-metrics lists bases; .sum/.avg/.pct roll up
