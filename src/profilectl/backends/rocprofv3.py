"""rocprofv3 (rocprofiler-sdk, ROCm 6.2 to 7.x): kernel/API tracing and counter collection.

Facts this module relies on (rocprofiler-sdk's rocprofv3.py, per release; profiling/tools/
rocprofv3.yaml holds them with their sources): the application follows `--`; each `pmc:` line of
an `-i` input file is one pass that re-runs the application; the default output format changed
from csv to rocpd in 7.0, so --output-format is always passed; files land in
<dir>/<hostname>/<pid>_<kind>.csv. Options are only passed when the installed release has them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from profilectl import countersets, data
from profilectl.backends.base import Backend, Job, Step, rank_hook_env, unsupported
from profilectl.countersets import CounterSet
from profilectl.facts import Facts, Verdict
from profilectl.formats import counter_listing
from profilectl.formats import rocprofv3 as csv_reader
from profilectl.formats.counter_listing import CounterListing
from profilectl.formats.pc_sampling import PcSamplingReader
from profilectl.formats.rocpd import RocpdReader
from profilectl.formats.rocprofv3_json import Rocprofv3JsonReader
from profilectl.formats.rocprofv3_stats import Rocprofv3StatsReader
from profilectl.probe.counters import release_verdict
from profilectl.probe.machine import CommandResult
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

OLDEST_SUPPORTED = (6, 2)
# NCCL/RCCL kernels: replaying one for counters waits for ranks that are not replaying (a hang)
COLLECTIVE_KERNELS = "nccl|rccl"
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
    """Does this release of rocprofv3 have this option (output format, placeholder, command)?"""
    entry = (tool_facts().get(kind) or {}).get(name)
    if entry is None:
        return False
    since, until = (entry.get("since"), entry.get("until")) if isinstance(entry, dict) else (entry, None)
    return release >= version_tuple(str(since)) and (until is None or release <= version_tuple(str(until)))


def since(kind: str, name: str) -> str:
    entry = (tool_facts().get(kind) or {}).get(name) or {}
    return str(entry.get("since") if isinstance(entry, dict) else entry)


def pc_sampling_method(facts: Facts) -> tuple[str | None, str]:
    """The best PC sampling method of the first AMD GPU at this ROCm release (stochastic, the
    hardware sampler, before host trap), or None and why not."""
    gpu = facts.first_gpu("amd")
    if gpu is None:
        return None, "PC sampling needs an AMD Instinct GPU; none found"
    methods = data.arch_facts("amd", gpu.arch).get("pc_sampling") or {}
    if not methods:
        return None, f"rocprofv3 has no PC sampling on {gpu.arch} (Instinct gfx90a, gfx94x and gfx950 only)"
    release = rocm_release(facts)
    usable = [m for m in tool_facts()["pc_sampling_methods"] if m in methods and release >= version_tuple(methods[m])]
    if not usable:
        first = min(methods.values(), key=version_tuple)
        return None, f"PC sampling on {gpu.arch} needs ROCm {first} or later (this is {facts.rocm.version})"
    return usable[0], f"{usable[0]} PC sampling on {gpu.arch}"


def output_formats(service: str, release: tuple[int, ...], preset: str | None = None) -> list[str]:
    """Always named (the default changed in 7.0); csv for the tables, pftrace for Perfetto, and
    from 7.0 rocpd beside them so the raw records survive in one database (read in preference)."""
    if preset == "pc-sampling":
        return ["csv"]  # PC samples are written to csv/json only
    formats = ["csv"]
    if service == "trace" and has("output_formats", "pftrace", release):
        formats.append("pftrace")
    if release >= version_tuple(str(tool_facts()["keep_rocpd_from"])) and has("output_formats", "rocpd", release):
        formats.append("rocpd")
    return formats


class Rocprofv3(Backend):
    name = "rocprofv3"
    tool_name = "rocprofv3"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"
    readers = (csv_reader.Rocprofv3CsvReader(), RocpdReader(), Rocprofv3JsonReader(), Rocprofv3StatsReader(),
               PcSamplingReader(), csv_reader.PerfettoTraceReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        if self.tool(facts) is None:
            return Verdict(False, "rocprofv3 not found (ships with ROCm 6.2 and later)",
                           "install rocprofiler-sdk, or add /opt/rocm/bin to PATH")
        release = rocm_release(facts)
        if facts.rocm.version and release < OLDEST_SUPPORTED:
            return Verdict(False, f"ROCm {facts.rocm.version} predates a usable rocprofv3 (6.2)")
        if request.service == "counters":
            if (refusal := self.counter_gate(facts)):
                return refusal
            gpu = facts.first_gpu("amd")
            arch = data.arch_facts("amd", gpu.arch if gpu else None)
            if gpu and arch and (refusal := release_verdict(gpu, arch, facts.rocm.version)):
                return refusal
        if request.service == "trace" and request.preset == "pc-sampling":
            required = presets()["pc-sampling"]["requires"]
            if facts.rocm.version and not has("options", required, release):
                return Verdict(False, f"rocprofv3 of ROCm {facts.rocm.version} has no PC sampling (from ROCm "
                               f"{since('options', required)})", f"use ROCm {since('options', required)} or later")
            method, why = pc_sampling_method(facts)
            if method is None:
                return Verdict(False, why, cause="no-pc-sampling")
            if (refusal := self.counter_gate(facts)) and refusal.cause == "missing-perfmon":
                return refusal
            return Verdict(True, f"rocprofv3 from ROCm {facts.rocm.version or 'unknown'}: {why}")
        return Verdict(True, f"rocprofv3 from ROCm {facts.rocm.version or 'unknown (assuming 6.2 options)'}")

    def preset_options(self, request: Request, facts: Facts) -> tuple[list[str], list[str]]:
        """(options this release has, options it lacks) of the preset (validated by the plan)."""
        release = rocm_release(facts)
        options = presets()[request.preset]["options"]
        kept = [o for o in options if has("options", o, release)]
        return kept, [o for o in options if o not in kept]

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        release = rocm_release(facts)
        if request.service == "counters" and not request.include_collectives:
            if has("options", "--kernel-exclude-regex", release):
                notes.append(f"collective kernels ({COLLECTIVE_KERNELS}) are left out of counter collection "
                             "(--include-collectives to keep them)")
            else:
                notes.append("this rocprofv3 cannot leave out collective kernels (--kernel-exclude-regex is from ROCm "
                             "6.3): a multi-rank job with RCCL kernels may hang while they are replayed")
        if request.bounds.launch_window:
            notes.append("--launch-skip/--launch-count apply to each kernel separately in rocprofv3 "
                         "(--kernel-iteration-range counts every kernel's own launches)")
        if request.service == "trace":
            _, dropped = self.preset_options(request, facts)
            if dropped:
                notes.append(f"preset {request.preset}: {', '.join(dropped)} not in ROCm "
                             f"{'.'.join(map(str, release))}; left out")
        return notes

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        if job.request.service == "trace":
            env.update(presets()[job.request.preset].get("env") or {})
        if job.request.bounds.steps is not None:
            env.update(rank_hook_env(job, step_action="roctx"))  # --selected-regions follows roctx pause/resume
        return env

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        release = rocm_release(job.facts)
        argv = [tool.path]
        request = job.request
        if request.service == "trace":
            options, _ = self.preset_options(request, job.facts)
            argv += options
            if request.preset == "pc-sampling":
                method, _ = pc_sampling_method(job.facts)
                spec = tool_facts()["pc_sampling_methods"][method]
                argv += ["--pc-sampling-method", str(method), "--pc-sampling-unit", str(spec["unit"]),
                         "--pc-sampling-interval", str(spec["interval"])]
            else:
                argv.append("--stats")
        else:
            argv += ["-i", str(job.raw_dir / INPUT_FILE), "--kernel-trace"]
        argv += self.bound(job)
        formats = output_formats(request.service, release, request.preset if request.service == "trace" else None)
        argv += ["--output-format", *formats, "-d", str(job.raw_dir), *self.output_name(job),
                 *request.bounds.profiler_args, "--"]
        return (Step(argv=job.launch.wrap(argv), label=self.name),)

    def output_name(self, job: Job) -> list[str]:
        """Per-rank file names for a multi-rank job: <host>/rank<R>-<pid>_<kind>.csv (the rank from
        the launcher's variable; %rank% reads SLURM_PROCID / OMPI_COMM_WORLD_RANK / MPI_RANK itself).
        6.2 has no %hostname%: rank<R>-<pid>_<kind>.csv. A plain program keeps the default layout."""
        launch = job.launch
        if not launch.multi_rank:
            return []
        rank = "%rank%" if launch.placement == "inside" else f"%env{{{launch.rank_env[0]}}}%"
        host = "%hostname%/" if has("placeholders", "%hostname%", rocm_release(job.facts)) else ""
        return ["-o", f"{host}rank{rank}-%pid%"]

    def bound(self, job: Job) -> list[str]:
        """The bounded-profiling request as this release's rocprofv3 options (or a refusal naming why)."""
        bounds, request = job.request.bounds, job.request
        release = rocm_release(job.facts)
        version = f"rocprofv3 of ROCm {'.'.join(map(str, release))}"
        argv: list[str] = []

        def need(option: str, asked: str) -> None:
            if not has("options", option, release):
                raise unsupported(version, asked, f"it has no {option} (from ROCm {since('options', option)})")
        if bounds.kernel is not None:
            need("--kernel-include-regex", "--kernel")
            argv += ["--kernel-include-regex", bounds.kernel]
        exclude = [bounds.exclude_kernel] if bounds.exclude_kernel else []
        if request.service == "counters" and not request.include_collectives and \
                has("options", "--kernel-exclude-regex", release):
            exclude.append(COLLECTIVE_KERNELS)
        if exclude:
            need("--kernel-exclude-regex", "--exclude-kernel")
            argv += ["--kernel-exclude-regex", "|".join(exclude)]
        if bounds.launch_window:
            need("--kernel-iteration-range", "--launch-skip/--launch-count")
            if bounds.launch_count is None:
                raise unsupported(version, "--launch-skip alone", "its iteration range needs an end: add --launch-count")
            first = (bounds.launch_skip or 0) + 1
            argv += ["--kernel-iteration-range", f"[{first}-{first + bounds.launch_count - 1}]"]
        if bounds.steps is not None:
            need("--selected-regions", "--steps")
            if not job.launch.python_ranks:
                raise unsupported(self.name, "--steps", "steps are PyTorch training steps; this workload is not Python")
            argv.append("--selected-regions")
        if bounds.nvtx_range is not None:
            raise unsupported(self.name, "--range", "it selects no ranges by name; use --steps or --kernel")
        return argv

    def counter_passes(self, counter_set: CounterSet) -> tuple[tuple[str, ...], ...]:
        # Each `pmc:` line is a pass that re-runs the application: as few as the blocks allow.
        return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)

    def input_file(self, passes: tuple[tuple[str, ...], ...]) -> str:
        return countersets.pmc_text(passes)

    def list_counters(self, facts: Facts, run: Callable[[list[str]], CommandResult]) -> CounterListing:
        """From 7.0 `rocprofv3-avail list --pmc` (what -L itself runs); else, or when it fails,
        `rocprofv3 -L` (--list-metrics before 6.4, --list-avail after; -L in every release)."""
        avail = facts.tool("rocprofv3-avail")
        if avail and has("commands", "rocprofv3-avail", rocm_release(facts)):
            argv = [avail.path, "list", "--pmc"]
            listing = counter_listing.rocprofv3_avail(run(argv).output, "rocprofv3-avail list --pmc")
            if listing.names:
                return listing
        argv = [self.require_tool(facts).path, "-L"]
        result = run(argv)
        listing = counter_listing.rocprofv3(result.output, "rocprofv3 -L")
        return listing if listing.names or result.ok else CounterListing("rocprofv3 -L", ran=False)
