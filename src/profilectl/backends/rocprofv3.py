"""rocprofv3 (rocprofiler-sdk, ROCm 6.2 to 7.x): kernel/API tracing and counter collection.

Facts this module relies on (rocprofiler-sdk's rocprofv3.py, per release; profiling/tools/
rocprofv3.yaml holds them with their sources): the application follows `--`; each `pmc:` line of
an `-i` input file is one pass that re-runs the application; the default output format changed
from csv to rocpd in 7.0, so --output-format is always passed; files land in
<dir>/<hostname>/<pid>_<kind>.csv. Options are only passed when the installed release has them.
"""

from __future__ import annotations

import functools
from typing import Any

from profilectl import countersets, data
from profilectl.backends.base import Backend, Job, Step
from profilectl.countersets import CounterSet
from profilectl.facts import Facts, Verdict
from profilectl.formats import rocprofv3 as csv_reader
from profilectl.formats.rocpd import RocpdReader
from profilectl.formats.rocprofv3_json import Rocprofv3JsonReader
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

OLDEST_SUPPORTED = (6, 2)
INPUT_FILE = "input.txt"  # in the phase's raw folder


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprofv3.yaml")


def presets() -> dict[str, Any]:
    """The tracing presets (name -> options, env): one list for every tracing backend."""
    return tool_facts().get("presets") or {}


def rocm_release(facts: Facts) -> tuple[int, ...]:
    return version_tuple(facts.rocm.version)[:2] or OLDEST_SUPPORTED


def has(kind: str, name: str, release: tuple[int, ...]) -> bool:
    since = (tool_facts().get(kind) or {}).get(name)
    return since is not None and release >= version_tuple(str(since))


class Rocprofv3(Backend):
    name = "rocprofv3"
    tool_name = "rocprofv3"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"
    readers = (csv_reader.Rocprofv3CsvReader(), RocpdReader(), Rocprofv3JsonReader(),
               csv_reader.PerfettoTraceReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        if self.tool(facts) is None:
            return Verdict(False, "rocprofv3 not found (ships with ROCm 6.2 and later)",
                           "install rocprofiler-sdk, or add /opt/rocm/bin to PATH")
        release = rocm_release(facts)
        if facts.rocm.version and release < OLDEST_SUPPORTED:
            return Verdict(False, f"ROCm {facts.rocm.version} predates a usable rocprofv3 (6.2)")
        if request.service == "counters" and (refusal := self.counter_gate(facts)):
            return refusal
        return Verdict(True, f"rocprofv3 from ROCm {facts.rocm.version or 'unknown (assuming 6.2 options)'}")

    def preset_options(self, request: Request, facts: Facts) -> tuple[list[str], list[str]]:
        """(options this release has, options it lacks) of the preset (validated by the plan)."""
        release = rocm_release(facts)
        options = presets()[request.preset]["options"]
        kept = [o for o in options if has("options", o, release)]
        return kept, [o for o in options if o not in kept]

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        if request.service != "trace":
            return []
        _, dropped = self.preset_options(request, facts)
        release = ".".join(map(str, rocm_release(facts)))
        return [f"preset {request.preset}: {', '.join(dropped)} not in ROCm {release}; left out"] if dropped else []

    def environment(self, request: Request) -> dict[str, str]:
        env = super().environment(request)
        if request.service == "trace":
            env.update(presets()[request.preset].get("env") or {})
        return env

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        release = rocm_release(job.facts)
        argv = [tool.path]
        if job.request.service == "trace":
            options, _ = self.preset_options(job.request, job.facts)
            formats = ["csv"] + (["pftrace"] if has("output_formats", "pftrace", release) else [])
            argv += options + ["--stats"]
        else:
            argv += ["-i", str(job.raw_dir / INPUT_FILE), "--kernel-trace"]
            formats = ["csv"]
        argv += ["--output-format", *formats, "-d", str(job.raw_dir), "--", *job.request.workload]
        return (Step(argv=tuple(argv), label=self.name),)

    def counter_passes(self, counter_set: CounterSet) -> tuple[tuple[str, ...], ...]:
        # Each `pmc:` line is a pass that re-runs the application: as few as the blocks allow.
        return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)

    def input_file(self, passes: tuple[tuple[str, ...], ...]) -> str:
        return countersets.pmc_text(passes)

    def list_counters_argv(self, facts: Facts) -> list[str]:
        return [self.require_tool(facts).path, "-L"]

    def parse_counter_list(self, output: str) -> set[str]:
        return csv_reader.available_counters(output)
