"""Legacy rocprof (v1) and rocprofv2, for ROCm releases before rocprofv3 (or where it is broken).

Unlike rocprofv3, the application follows the options directly (no `--`). v1 writes
results.csv (+ results.stats.csv with --stats, results.json for traces); v2 writes
results_<pid>.csv through its plugins.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

from profilectl import countersets, data
from profilectl.backends.base import Backend, Job, Step, amd_counter_needs, unsupported
from profilectl.backends.rocprofv3 import INPUT_FILE
from profilectl.facts import Facts, Tool, Verdict
from profilectl.formats import counter_listing
from profilectl.formats import rocprof_legacy as reader
from profilectl.formats.counter_listing import CounterListing
from profilectl.privilege import Need
from profilectl.probe.machine import CommandResult
from profilectl.request import Request


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprof.yaml")


class LegacyRocprof(Backend):
    name = "rocprof"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"
    pass_per_run = True
    readers = (reader.ResultsReader(), reader.StatsReader(), reader.TraceReader())

    def tool(self, facts: Facts) -> Tool | None:
        return facts.tool("rocprof") or facts.tool("rocprofv2")

    def capabilities(self, facts: Facts, request: Request) -> tuple[Need, ...]:
        return amd_counter_needs(facts, request, "rocprof")

    def generation(self, facts: Facts) -> str:
        return "v1" if facts.tool("rocprof") else "v2"

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "neither rocprof nor rocprofv2 found", "install rocprofiler (ROCm 5.x/6.x)")
        if request.service == "counters":
            if (refusal := self.counter_gate(facts)):
                return refusal
            gpu = facts.first_gpu("amd")
            arch = data.arch_facts("amd", gpu.arch if gpu else None)
            if gpu and arch and not arch.get("rocprof_v1_counters"):
                return Verdict(False, f"legacy {tool.name} has no counter definitions for {gpu.arch} ({arch.get('family')})",
                               "use rocprofv3 of a ROCm release that lists this GPU's counters (profiling/gpus.yaml)",
                               cause="arch-unsupported")
        return Verdict(True, f"{tool.name} (legacy) from ROCm {facts.rocm.version or 'unknown'}")

    def steps(self, job: Job) -> tuple[Step, ...]:
        bounds = job.request.bounds
        asked = [*bounds.kernel_selection, *(option for option, value in (("--steps", bounds.steps),
                                                                          ("--range", bounds.nvtx_range))
                                             if value is not None)]
        if asked:
            raise unsupported(f"legacy {self.name}", asked[0], "it has no kernel filters or windows; use rocprofv3 "
                              "(ROCm 6.3+) for bounded profiling")
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
        return (Step(argv=job.launch.wrap(argv + list(bounds.profiler_args)), label=tool.name),)

    def input_file(self, passes: tuple[tuple[str, ...], ...]) -> str:
        return countersets.pmc_text(passes)

    def list_counters(self, facts: Facts, run: Callable[[list[str]], CommandResult]) -> CounterListing:
        """v1: --list-basic and --list-derived together (derived metrics are valid pmc names too);
        v2: --list-counters. v1's script exits 1 after listing, so the output decides, not the code."""
        tool = self.require_tool(facts)
        listings = []
        for flags in tool_facts()["list_counters"][self.generation(facts)]:
            result = run([tool.path, *flags])
            command = " ".join([os.path.basename(tool.path), *flags])
            listing = counter_listing.rocprof_legacy(result.output, command)
            listings.append(listing if listing.names or listing.first_line else CounterListing(command, ran=False))
        return counter_listing.union(listings)
