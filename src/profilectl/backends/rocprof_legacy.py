"""Legacy rocprof (v1) and rocprofv2, for ROCm releases before rocprofv3 (or where it is broken).

Unlike rocprofv3, the application follows the options directly (no `--`). v1 writes
results.csv (+ results.stats.csv with --stats, results.json for traces); v2 writes
results_<pid>.csv through its plugins.
"""

from __future__ import annotations

import functools
from pathlib import Path

from profilectl import countersets, data
from profilectl.backends.base import Backend, Collected, Step, StepResult, read_outputs
from profilectl.probe.report import EnvReport, Tool, Verdict
from profilectl.request import Request


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict:
    return data.load_yaml(data.find("tools/rocprof.yaml"))


class LegacyRocprof(Backend):
    name = "rocprof"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"

    def tool(self, env: EnvReport) -> Tool | None:
        return env.tool("rocprof") or env.tool("rocprofv2")

    def generation(self, env: EnvReport) -> str:
        return "v1" if env.tool("rocprof") else "v2"

    def available(self, env: EnvReport, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(env)):
            return refusal
        tool = self.tool(env)
        if tool is None:
            return Verdict(False, "neither rocprof nor rocprofv2 found", "install rocprofiler (ROCm 5.x/6.x)")
        if request.service == "counters" and (refusal := self.counter_gate(env)):
            return refusal
        return Verdict(True, f"{tool.name} (legacy) from ROCm {env.rocm.version or 'unknown'}")

    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        tool = self.tool(env)
        generation = self.generation(env)
        argv = [tool.path]
        if request.service == "trace":
            argv += tool_facts()["presets"][request.preset][generation]
            if generation == "v2":
                argv += ["--plugin", "perfetto"]
        else:
            argv += ["-i", str(raw_dir / "input.txt")]
        if generation == "v1":
            argv += ["--stats", "--timestamp", "on", "-d", str(raw_dir), "-o", str(raw_dir / "results.csv")]
        else:
            argv += ["-d", str(raw_dir), "-o", "results"]
        return [Step(argv=argv + list(request.workload), label=tool.name)]

    def counter_passes(self, counter_set) -> list[list[str]]:
        # Each `pmc:` line is a pass that re-runs the application: as few as the blocks allow.
        return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)

    def input_file(self, passes: list[list[str]]) -> str:
        return countersets.pmc_text(passes)

    def list_counters_argv(self, env: EnvReport) -> list[str]:
        flags = tool_facts()["list_counters"][self.generation(env)]
        return [self.tool(env).path, *flags]

    def parse_counter_list(self, output: str) -> set[str]:
        # v1 prints "  gpu-agent0 : SQ_WAVES : Count number of waves..." lines.
        names = set()
        for line in output.splitlines():
            parts = [p.strip() for p in line.split(":")]
            if len(parts) >= 3 and parts[0].startswith("gpu-agent") and parts[1]:
                names.add(parts[1].split("[")[0])
        return names

    def collect(self, raw_dir: Path, request: Request, results: list[StepResult]) -> Collected:
        return read_outputs(raw_dir)
