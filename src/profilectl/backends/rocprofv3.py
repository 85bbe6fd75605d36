"""rocprofv3 (rocprofiler-sdk, ROCm 6.2 to 7.x): kernel/API tracing and counter collection.

Facts this module relies on (rocprofiler-sdk docs): the application follows `--`; each `pmc:` line
of an `-i` input file is one pass that re-runs the application; the default output format changed
from csv to rocpd in 7.0, so --output-format is always passed; files land in
<dir>/<hostname>/<pid>_<kind>.csv. Options are only passed when the installed release has them
(profiling/tools/rocprofv3.yaml).
"""

from __future__ import annotations

import functools
from pathlib import Path

from profilectl import countersets, data
from profilectl.backends.base import Backend, Collected, Step, StepResult, read_outputs
from profilectl.formats import rocprofv3 as reader
from profilectl.probe.facts import version_tuple
from profilectl.probe.report import EnvReport, Verdict
from profilectl.request import Request

OLDEST_SUPPORTED = (6, 2)


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict:
    path = data.find("tools/rocprofv3.yaml")
    return data.load_yaml(path) if path else {"options": {}, "output_formats": {}, "presets": {}}


def preset_names() -> dict:
    """The tracing presets (name -> options, env): one list for every tracing backend."""
    return tool_facts().get("presets") or {}


def rocm_release(env: EnvReport) -> tuple[int, ...]:
    return version_tuple(env.rocm.version)[:2] or OLDEST_SUPPORTED


def has(kind: str, name: str, release: tuple[int, ...]) -> bool:
    since = (tool_facts().get(kind) or {}).get(name)
    return since is not None and release >= version_tuple(str(since))


class Rocprofv3(Backend):
    name = "rocprofv3"
    tool_name = "rocprofv3"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"

    def available(self, env: EnvReport, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(env)):
            return refusal
        if self.tool(env) is None:
            return Verdict(False, "rocprofv3 not found (ships with ROCm 6.2 and later)",
                           "install rocprofiler-sdk, or add /opt/rocm/bin to PATH")
        release = rocm_release(env)
        if env.rocm.version and release < OLDEST_SUPPORTED:
            return Verdict(False, f"ROCm {env.rocm.version} predates a usable rocprofv3 (6.2)")
        if request.service == "counters" and (refusal := self.counter_gate(env)):
            return refusal
        return Verdict(True, f"rocprofv3 from ROCm {env.rocm.version or 'unknown (assuming 6.2 options)'}")

    def preset_options(self, request: Request, env: EnvReport) -> tuple[list[str], list[str]]:
        """(options this release has, options it lacks) of the preset (validated by the plan)."""
        release = rocm_release(env)
        options = preset_names()[request.preset]["options"]
        kept = [o for o in options if has("options", o, release)]
        return kept, [o for o in options if o not in kept]

    def plan_notes(self, request: Request, env: EnvReport) -> list[str]:
        if request.service != "trace":
            return []
        _, dropped = self.preset_options(request, env)
        release = ".".join(map(str, rocm_release(env)))
        return [f"preset {request.preset}: {', '.join(dropped)} not in ROCm {release}; left out"] if dropped else []

    def environment(self, request: Request) -> dict[str, str]:
        env = super().environment(request)
        if request.service == "trace":
            env.update(preset_names()[request.preset].get("env") or {})
        return env

    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        tool = self.tool(env)
        release = rocm_release(env)
        argv = [tool.path]
        if request.service == "trace":
            options, _ = self.preset_options(request, env)
            formats = ["csv"] + (["pftrace"] if has("output_formats", "pftrace", release) else [])
            argv += options + ["--stats"]
        else:
            argv += ["-i", str(raw_dir / "input.txt"), "--kernel-trace"]
            formats = ["csv"]
        argv += ["--output-format", *formats, "-d", str(raw_dir), "--", *request.workload]
        return [Step(argv=argv, label=self.name)]

    def counter_passes(self, counter_set) -> list[list[str]]:
        # Each `pmc:` line is a pass that re-runs the application: as few as the blocks allow.
        return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)

    def input_file(self, passes: list[list[str]]) -> str:
        return countersets.pmc_text(passes)

    def list_counters_argv(self, env: EnvReport) -> list[str]:
        return [self.tool(env).path, "-L"]

    def parse_counter_list(self, output: str) -> set[str]:
        return reader.available_counters(output)

    def collect(self, raw_dir: Path, request: Request, results: list[StepResult]) -> Collected:
        return read_outputs(raw_dir)
