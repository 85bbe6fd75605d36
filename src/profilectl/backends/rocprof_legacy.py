"""Legacy rocprof (v1) and rocprofv2, for ROCm releases before rocprofv3 (or where it is broken).

Unlike rocprofv3, the application follows the options directly (no `--`). v1 writes
results.csv (+ results.stats.csv with --stats, results.json for traces); v2 writes
results_<pid>.csv through its plugins.
"""

from __future__ import annotations

import functools
from typing import Any

from profilectl import countersets, data
from profilectl.backends.base import Backend, Job, Step
from profilectl.backends.rocprofv3 import INPUT_FILE
from profilectl.countersets import CounterSet
from profilectl.facts import Facts, Tool, Verdict
from profilectl.formats import rocprof_legacy as reader
from profilectl.request import Request


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprof.yaml")


class LegacyRocprof(Backend):
    name = "rocprof"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"
    readers = (reader.ResultsReader(), reader.StatsReader(), reader.TraceReader())

    def tool(self, facts: Facts) -> Tool | None:
        return facts.tool("rocprof") or facts.tool("rocprofv2")

    def generation(self, facts: Facts) -> str:
        return "v1" if facts.tool("rocprof") else "v2"

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "neither rocprof nor rocprofv2 found", "install rocprofiler (ROCm 5.x/6.x)")
        if request.service == "counters" and (refusal := self.counter_gate(facts)):
            return refusal
        return Verdict(True, f"{tool.name} (legacy) from ROCm {facts.rocm.version or 'unknown'}")

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        generation = self.generation(job.facts)
        raw = job.raw_dir
        argv = [tool.path]
        if job.request.service == "trace":
            argv += tool_facts()["presets"][job.request.preset][generation]
            if generation == "v2":
                argv += ["--plugin", "perfetto"]
        else:
            argv += ["-i", str(raw / INPUT_FILE)]
        if generation == "v1":
            argv += ["--stats", "--timestamp", "on", "-d", str(raw), "-o", str(raw / "results.csv")]
        else:
            argv += ["-d", str(raw), "-o", "results"]
        return (Step(argv=tuple(argv + list(job.request.workload)), label=tool.name),)

    def counter_passes(self, counter_set: CounterSet) -> tuple[tuple[str, ...], ...]:
        # Each `pmc:` line is a pass that re-runs the application: as few as the blocks allow.
        return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)

    def input_file(self, passes: tuple[tuple[str, ...], ...]) -> str:
        return countersets.pmc_text(passes)

    def list_counters_argv(self, facts: Facts) -> list[str]:
        flags = tool_facts()["list_counters"][self.generation(facts)]
        return [self.require_tool(facts).path, *flags]

    def parse_counter_list(self, output: str) -> set[str]:
        # v1 prints "  gpu-agent0 : SQ_WAVES : Count number of waves..." lines.
        names = set()
        for line in output.splitlines():
            parts = [p.strip() for p in line.split(":")]
            if len(parts) >= 3 and parts[0].startswith("gpu-agent") and parts[1]:
                names.add(parts[1].split("[")[0])
        return names
