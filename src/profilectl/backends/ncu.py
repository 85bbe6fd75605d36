"""Nsight Compute (ncu) for hardware counters on NVIDIA GPUs.

`ncu --metrics a,b --csv` works as root in a container with SYS_ADMIN; without permission it fails
with ERR_NVGPUCTRPERM. --target-processes all follows child processes (python launchers, MPI).
"""

from __future__ import annotations

from pathlib import Path

from profilectl.backends.base import Backend, Collected, Step, StepResult
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
        out = Collected()
        path = raw_dir / OUTPUT
        if path.exists() and path.stat().st_size:
            out.tables["counters"] = reader.metrics(path)
            durations = [r for r in out.tables["counters"] if r["counter"] == "gpu__time_duration.sum"]
            if durations:
                out.tables["kernels"] = _kernels_from_durations(durations)
        out.produced_output = bool(out.tables.get("counters"))
        return out


def _kernels_from_durations(rows: list[dict]) -> list[dict]:
    scale = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}
    total = sum(r["value"] * scale.get(r.get("unit", "ns"), 1.0) for r in rows) or 1.0
    kernels = []
    for r in rows:
        ns = r["value"] * scale.get(r.get("unit", "ns"), 1.0)
        kernels.append({"name": r["kernel"], "calls": r["dispatches"], "total_ns": ns,
                        "mean_ns": ns / max(r["dispatches"], 1), "percent": 100.0 * ns / total})
    return sorted(kernels, key=lambda k: k["total_ns"], reverse=True)
