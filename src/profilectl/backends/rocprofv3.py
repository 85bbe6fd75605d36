"""rocprofv3 (rocprofiler-sdk, ROCm 6.2 to 7.x and later): kernel/API tracing, counter collection,
attaching to a running process.

Facts this module relies on (rocprofiler-sdk's rocprofv3.py, per release; profiling/tools/
rocprofv3.yaml holds them with their sources): the application follows `--`; each counter pass
re-runs the application (JSON input `metrics:` on 6.2, `jobs:` from 6.3, repeated --pmc from
rocprofiler-sdk 1.3.0, where plain-text input is removed; kernel replay collects them in one run where
the tool's own --help lists it); the default output format changed from csv to rocpd in 7.0, so
--output-format is always passed, and from 7.0 only rocpd is asked for: CSV and Perfetto files are
made from it by AMD's `rocpd convert` where installed (tool_helpers/rocpd_convert.py). Options are
only passed when the installed rocprofv3 has them, placed by its rocprofiler-sdk version (its own
--version, else the SDK its ROCm release ships); one newer than the table is judged from its own
--help (probe/rocprofv3_help.py).
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from profilectl import data
from profilectl.backends.base import PMC_TEXT_FILE, Backend, Job, Step, amd_counter_needs, rank_hook_env, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.formats import counter_listing
from profilectl.redaction import redactor
from profilectl.formats import rocprofv3 as csv_reader
from profilectl.formats.counter_listing import CounterListing
from profilectl.formats.pc_sampling import PcSamplingReader
from profilectl.formats.rocpd import RocpdReader
from profilectl.formats.rocprofv3_json import Rocprofv3JsonReader
from profilectl.formats.rocprofv3_stats import Rocprofv3StatsReader
from profilectl.launchers.base import INSIDE
from profilectl.privilege import Need
from profilectl.probe import attach as attach_probe
from profilectl.probe.counters import release_verdict
from profilectl.probe.machine import CommandResult, Machine
from profilectl.probe.rocprofv3_help import HELP_TIMEOUT_S, HelpFacts, help_facts, sdk_version
from profilectl.probe.sources import version_tuple
from profilectl.request import Request, ranks_text

OLDEST_SUPPORTED = (6, 2)
# NCCL/RCCL kernels: replaying one for counters waits for ranks that are not replaying (a hang)
COLLECTIVE_KERNELS = "nccl|rccl"
INPUT_FILE = PMC_TEXT_FILE  # legacy rocprof's pmc: text input, in the phase's raw folder
INPUT_JSON = "input.json"  # rocprofv3's counter input (metrics: on 6.2, jobs: from 6.3)
HELPERS = Path(__file__).with_name("tool_helpers")


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprofv3.yaml")


def presets() -> dict[str, Any]:
    """The tracing presets (name -> options, env): one list for every tracing backend."""
    return tool_facts().get("presets") or {}


def rocm_release(facts: Facts) -> tuple[int, ...]:
    """The ROCm release X.Y (for facts keyed by ROCm itself: architectures, aqlprofile)."""
    return version_tuple(facts.rocm.version)[:2] or OLDEST_SUPPORTED


@dataclass(frozen=True)
class ToolLevel:
    """Where a rocprofv3 stands in profiling/tools/rocprofv3.yaml: its rocprofiler-sdk version (the
    key of every fact; None: unknown, then its --help decides) and the ROCm release it came with
    (separates releases that ship one SDK: 7.1 and 7.2 are both 1.1.0)."""
    sdk: tuple[int, ...] | None
    rocm: tuple[int, ...] | None
    source: str = ""

    def label(self) -> str:
        sdk = ".".join(map(str, self.sdk)) if self.sdk else "unknown"
        rocm = ".".join(map(str, self.rocm)) if self.rocm else "unknown"
        return f"rocprofiler-sdk {sdk} (ROCm {rocm}; {self.source})"


def releases() -> list[dict[str, Any]]:
    return list(tool_facts()["releases"])


def sdk_of_rocm(rocm: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The SDK a ROCm release ships, from the table: a three-part entry (7.2.4) matches in full,
    else major.minor; None where the table has no such release or no SDK for it."""
    if not rocm:
        return None
    exact = [r for r in releases() if len(version_tuple(str(r["rocm"]))) == 3
             and version_tuple(str(r["rocm"])) == tuple(rocm[:3]) + (0,) * (3 - len(rocm[:3]))]
    minor = [r for r in releases() if len(version_tuple(str(r["rocm"]))) == 2 and version_tuple(str(r["rocm"])) == rocm[:2]]
    found = exact or minor
    return version_tuple(str(found[0]["sdk"])) if found and found[0].get("sdk") else None


def level_of_rocm(rocm: tuple[int, ...] | None) -> ToolLevel:
    return ToolLevel(sdk_of_rocm(rocm), tuple(rocm) if rocm else None, "the SDK its ROCm release ships")


@functools.lru_cache(maxsize=None)
def _version_of(tool_path: str) -> tuple[int, ...] | None:
    return sdk_version(tool_path, run_quietly)


def tool_level(facts: Facts) -> ToolLevel:
    """The installed rocprofv3's level: its SDK version from its own `--version` (ROCm 7.0 and
    later have one), else the SDK its ROCm release ships (the releases table)."""
    rocm = version_tuple(facts.rocm.version) or None
    tool = facts.tool("rocprofv3")
    if tool is not None and (rocm is None or rocm[:2] >= (7, 0)):
        sdk = _version_of(tool.path)
        if sdk is not None:
            return ToolLevel(sdk, rocm, "rocprofv3 --version")
    return level_of_rocm(rocm)


def point(value: str) -> ToolLevel:
    """A `since`/`until` value of the table as a level: `sdk X.Y.Z`, or a ROCm release of the table
    (its SDK, and the release itself)."""
    text = str(value)
    if text.startswith("sdk "):
        return ToolLevel(version_tuple(text[4:]), None)
    rocm = version_tuple(text)
    return ToolLevel(sdk_of_rocm(rocm), rocm)


def reaches(level: ToolLevel, at: ToolLevel) -> bool:
    """Is `level` at or past `at`? By SDK version; where both are one SDK, by ROCm release."""
    if level.sdk is None or at.sdk is None:  # outside the table: by ROCm release (help decides first)
        return level.rocm is not None and at.rocm is not None and level.rocm >= at.rocm
    if level.sdk != at.sdk:
        return level.sdk > at.sdk
    return at.rocm is None or level.rocm is None or level.rocm >= at.rocm


def newest_known() -> tuple[int, ...]:
    return version_tuple(str(tool_facts()["newest_known_sdk"]))


def run_quietly(argv: list[str]) -> CommandResult:
    return Machine().run(argv, timeout_s=HELP_TIMEOUT_S)


@functools.lru_cache(maxsize=None)
def _help_of(tool_path: str) -> HelpFacts | None:
    return help_facts(tool_path, run_quietly)


def beyond_table(level: ToolLevel) -> bool:
    return level.sdk is None or level.sdk > newest_known()


def help_of(facts: Facts) -> HelpFacts | None:
    """The --help facts of a rocprofv3 beyond the table (its SDK newer than every one the table
    knows, or unknown); None otherwise, or when it prints no usable help (then the newest known
    SDK's facts are assumed)."""
    tool = facts.tool("rocprofv3")
    if tool is None or not beyond_table(tool_level(facts)):
        return None
    return _help_of(tool.path)


def effective_level(facts: Facts) -> ToolLevel:
    """The level the table is read at: the tool's own, or the newest known for one beyond it."""
    level = tool_level(facts)
    return ToolLevel(newest_known(), level.rocm, level.source) if beyond_table(level) else level


def supports(option: str, facts: Facts) -> bool:
    """Does the installed rocprofv3 accept this option? The table at its SDK version; its own
    --help where it is beyond the table, and for options only its help can place (help_decides)."""
    entry = (tool_facts().get("options") or {}).get(option) or {}
    if entry.get("help_decides"):
        tool = facts.tool("rocprofv3")
        helped = _help_of(tool.path) if tool is not None else None
        return helped is not None and helped.has(option)
    helped = help_of(facts)
    if helped is not None:
        return helped.has(option)
    return has("options", option, effective_level(facts))


def supports_format(fmt: str, facts: Facts) -> bool:
    helped = help_of(facts)
    if helped is not None and "--output-format" in helped.choices:
        return fmt in helped.choices["--output-format"]
    return has("output_formats", fmt, effective_level(facts))


def counter_input_form(facts: Facts) -> dict[str, Any]:
    """How this rocprofv3 takes counter passes (profiling/tools/rocprofv3.yaml counter_input)."""
    forms = tool_facts()["counter_input"]
    helped = help_of(facts)
    if helped is not None:  # beyond the table: repeated --pmc if its help says so, else jobs JSON
        wanted = "pmc-flags" if helped.multi_pass_pmc else "jobs-json"
        return next(f for f in forms if f["form"] == wanted)
    level = effective_level(facts)
    return next((f for f in forms if reaches(level, point(f["since"]))), forms[-1])


def kernel_replay(facts: Facts) -> list[str]:
    """The options that collect every counter pass in one run of the application (kernel replay),
    where this rocprofv3's own --help lists them; [] otherwise. No released rocprofv3.py with them
    was read (rocprofv3.yaml): they are never assumed from a version."""
    if counter_input_form(facts)["form"] != "pmc-flags" or not supports("--kernel-replay-beta-enabled", facts):
        return []  # replay takes its groups from repeated --pmc: an SDK without them has no replay
    tool = facts.tool("rocprofv3")
    helped = _help_of(tool.path) if tool is not None else None
    mode = ["--replay-mode", "kernel"] if helped is not None and "kernel" in helped.choices.get("--replay-mode", ()) \
        else []
    return [*mode, "--kernel-replay-beta-enabled"]


def counter_input_text(form: str, passes: tuple[tuple[str, ...], ...]) -> str | None:
    """The -i file for these passes in this form (None: the form takes no file)."""
    key = {"jobs-json": "jobs", "metrics-json": "metrics"}.get(form)
    if key is None:
        return None
    return json.dumps({key: [{"pmc": list(p)} for p in passes]}, indent=1) + "\n"


def rocpd_converter(facts: Facts) -> tuple[tuple[str, ...], dict[str, str]] | None:
    """AMD's converter: the `rocpd` command, else the rocpd Python package of the ROCm root
    (`python3 -m rocpd`, rocm-rel-7.0 lib/python3.X/site-packages/rocpd); None: not installed."""
    tool = facts.tool("rocpd")
    if tool is not None:
        return (tool.path,), {}
    root = facts.rocm.root
    if not root:
        return None
    found = sorted(Path(root).glob("lib/python3*/site-packages/rocpd/__main__.py"))
    if not found:
        return None
    return ("python3", "-m", "rocpd"), {"PYTHONPATH": str(found[-1].parent.parent)}


def tool_selects_ranks(facts: Facts, request: Request) -> bool:
    """rocprofv3 selects the ranks itself (--profile-mpi-ranks) only where it has the option and the
    job's size is known, so the list was checked against it (request.absent_ranks): the tool stops
    every rank with a fatal error when the list names a rank beyond the world size (rocprofv3.py
    should_rank_provide_output). Otherwise profilectl's rank gate runs the ranks that exist."""
    return supports("--profile-mpi-ranks", facts) and request.launch.ranks is not None


def has(kind: str, name: str, level: "ToolLevel | tuple[int, ...]") -> bool:
    """Does a rocprofv3 at this level (or of this ROCm release) have this option (output format,
    placeholder, command)? An entry only the tool's --help can place (help_decides) is never had
    by version alone."""
    if not isinstance(level, ToolLevel):
        level = level_of_rocm(level)
    entry = (tool_facts().get(kind) or {}).get(name)
    if entry is None or (isinstance(entry, dict) and entry.get("help_decides")):
        return False
    since, until = (entry.get("since"), entry.get("until")) if isinstance(entry, dict) else (entry, None)
    return reaches(level, point(str(since))) and (until is None or not reaches(level, point(str(until))) or
                                                  _same(level, point(str(until))))


def _same(level: ToolLevel, at: ToolLevel) -> bool:
    """`level` is `at` itself (an `until` release still has the option)."""
    if level.sdk != at.sdk:
        return False
    return at.rocm is None or level.rocm is None or level.rocm[:len(at.rocm)] == at.rocm


def since(kind: str, name: str) -> str:
    """When an entry arrived, as a user reads it: ROCm X (rocprofiler-sdk Y), or the SDK alone."""
    entry = (tool_facts().get(kind) or {}).get(name) or {}
    value = str(entry.get("since") if isinstance(entry, dict) else entry)
    if value.startswith("sdk "):
        shipped = [str(r["rocm"]) for r in releases() if r.get("sdk") and version_tuple(str(r["sdk"])) ==
                   version_tuple(value[4:])]
        return f"rocprofiler-sdk {value[4:]}" + (f" (ROCm {' and '.join(shipped)})" if shipped else "")
    return f"ROCm {value}"


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


def output_formats(service: str, release: "ToolLevel | tuple[int, ...]", preset: str | None = None,
                   converter: bool = True) -> list[str]:
    """Always named (the default changed in 7.0). From 7.0 rocpd first: the database is read, and
    CSV and Perfetto files are made from it by `rocpd convert` (direct csv/pftrace output is
    deprecated in development builds); where no converter is installed a trace also asks for
    pftrace, so the run still has its Perfetto file. Before 7.0: csv for the tables, pftrace."""
    if preset == "pc-sampling":
        return ["csv"]  # PC samples are written to csv/json only
    level = release if isinstance(release, ToolLevel) else level_of_rocm(release)
    if reaches(level, point(str(tool_facts()["keep_rocpd_from"]))) and has("output_formats", "rocpd", level):
        return ["rocpd"] if converter or service != "trace" else ["rocpd", "pftrace"]
    formats = ["csv"]
    if service == "trace" and has("output_formats", "pftrace", level):
        formats.append("pftrace")
    return formats


class Rocprofv3(Backend):
    name = "rocprofv3"
    tool_name = "rocprofv3"
    services = frozenset({"counters", "trace"})
    is_profiler = True
    vendor = "amd"
    selects_ranks = True
    pass_per_run = True
    readers = (csv_reader.Rocprofv3CsvReader(), RocpdReader(), Rocprofv3JsonReader(), Rocprofv3StatsReader(),
               PcSamplingReader(), csv_reader.PerfettoTraceReader())

    def capabilities(self, facts: Facts, request: Request) -> tuple[Need, ...]:
        return amd_counter_needs(facts, request, "rocprofv3")

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        if self.tool(facts) is None:
            return Verdict(False, "rocprofv3 not found (ships with ROCm 6.2 and later)",
                           "install rocprofiler-sdk, or add /opt/rocm/bin to PATH")
        release = rocm_release(facts)
        if facts.rocm.version and release < OLDEST_SUPPORTED:
            return Verdict(False, f"ROCm {facts.rocm.version} predates a usable rocprofv3 (6.2)")
        if request.attach is not None and (refusal := self.attach_verdict(facts, request)):
            return refusal
        if request.service == "counters":
            if (refusal := self.counter_gate(facts)):
                return refusal
            gpu = facts.first_gpu("amd")
            arch = data.arch_facts("amd", gpu.arch if gpu else None)
            if gpu and arch and (refusal := release_verdict(gpu, arch, facts.rocm.version)):
                return refusal
        if request.service == "trace" and request.preset == "pc-sampling":
            required = presets()["pc-sampling"]["requires"]
            if facts.rocm.version and not has("options", required, effective_level(facts)):
                return Verdict(False, f"rocprofv3 of ROCm {facts.rocm.version} has no PC sampling (from "
                               f"{since('options', required)})", f"use {since('options', required)} or later")
            method, why = pc_sampling_method(facts)
            if method is None:
                return Verdict(False, why, cause="no-pc-sampling")
            if (refusal := self.counter_gate(facts)) and refusal.cause == "missing-perfmon":
                return refusal
            return Verdict(True, f"rocprofv3 from ROCm {facts.rocm.version or 'unknown'}: {why}")
        return Verdict(True, f"rocprofv3 from ROCm {facts.rocm.version or 'unknown (assuming 6.2 options)'}")

    def attach_verdict(self, facts: Facts, request: Request) -> Verdict | None:
        """Why `--attach PID` cannot work here (None: it can): the release, the target, ptrace."""
        attach, spec = request.attach, tool_facts()["attach"]
        assert attach is not None
        if request.service not in spec["services"]:
            return Verdict(False, f"rocprofv3 attaches for {' and '.join(spec['services'])} only",
                           cause="attach-service")
        if not supports("--attach", facts):
            return Verdict(False, f"rocprofv3 of ROCm {facts.rocm.version or 'unknown'} cannot attach to a running "
                           f"process (--attach is from ROCm {spec['since']})",
                           f"use ROCm {spec['since']} or later, or start the workload under profilectl",
                           cause="attach-release")
        target = attach_probe.attach_target(attach)
        if not target.exists:
            return attach_probe.target_verdict(target)
        ptrace = attach_probe.permission(facts, attach.ptrace_scope, attach.uid)
        if not ptrace.available:
            return ptrace
        ready = attach_probe.target_verdict(target)
        return None if ready.available else ready

    def preset_options(self, request: Request, facts: Facts) -> tuple[list[str], list[str]]:
        """(options this release has, options it lacks) of the preset (validated by the plan)."""
        options = presets()[request.preset]["options"]
        kept = [o for o in options if supports(o, facts)]
        return kept, [o for o in options if o not in kept]

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        release = effective_level(facts)
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
                notes.append(f"preset {request.preset}: {', '.join(dropped)} not in "
                             f"{tool_level(facts).label()}; left out")
        if request.attach is not None:
            attach = request.attach
            until = f"after {attach.duration_s:g} s" if attach.duration_s else "at Ctrl-C, --timeout or its end"
            command = redactor(request.redact).line(attach.cmdline) or "command line unreadable"  # secrets too
            notes.append(f"attached to running process {attach.pid} ({command}); detaches {until}")
        helped = help_of(facts)
        if helped is not None:
            notes.append(f"{tool_level(facts).label()} is newer than the rocprofiler-sdk releases profilectl knows "
                         f"({tool_facts()['newest_known_sdk']}): options chosen from {helped.source}")
        if request.service == "counters" and request.attach is None and kernel_replay(facts):
            notes.append("kernel replay (this rocprofv3's --help lists it): a counter set of several passes is "
                         "collected in one run of the application, each dispatch replayed once per pass")
        if request.service == "counters":
            form = counter_input_form(facts)
            notes.append(f"counter passes as {form['form']} ({form['sub_folder']}<n>/ folders)")
        if "rocpd" in output_formats(request.service, release, request.preset):
            if rocpd_converter(facts) is None:
                notes.append("rocpd convert is not installed: the rocpd database is read directly; no CSV files "
                             "are made from it" + (" (rocprofv3 writes the Perfetto trace itself)"
                                                   if request.service == "trace" else ""))
            else:
                notes.append("CSV and Perfetto files are made from the rocpd database by rocpd convert "
                             "(raw/rocpd-convert/made-by.json says which tool made each file)")
        if request.ranks and not tool_selects_ranks(facts, request):
            why = (f"this rocprofv3 has no --profile-mpi-ranks (from {since('options', '--profile-mpi-ranks')})"
                   if not supports("--profile-mpi-ranks", facts) else
                   f"{request.launch.launcher}'s command line does not say how many ranks the job starts, and "
                   "--profile-mpi-ranks stops every rank when the list names a rank beyond them")
            notes.append(f"--ranks {ranks_text(request.ranks)}: {why}; profilectl's rank gate starts rocprofv3 in "
                         "the listed ranks that exist (a listed rank the job does not start is not profiled)")
        return notes

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        if job.request.service == "trace":
            env.update(presets()[job.request.preset].get("env") or {})
        if job.request.bounds.steps is not None or job.request.bounds.nvtx_range is not None:
            env.update(rank_hook_env(job, step_action="roctx"))  # --selected-regions follows roctx pause/resume
        return env

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        release = effective_level(job.facts)
        argv = [tool.path]
        request = job.request
        converter = rocpd_converter(job.facts)
        formats = output_formats(request.service, release, request.preset if request.service == "trace" else None,
                                 converter is not None)
        formats = [f for f in formats if supports_format(f, job.facts)] or formats  # a newer release: its --help
        if request.service == "trace":
            options, _ = self.preset_options(request, job.facts)
            argv += options
            if request.preset == "pc-sampling":
                method, _ = pc_sampling_method(job.facts)
                spec = tool_facts()["pc_sampling_methods"][method]
                argv += ["--pc-sampling-method", str(method), "--pc-sampling-unit", str(spec["unit"]),
                         "--pc-sampling-interval", str(spec["interval"])]
            elif "csv" in formats:  # stats files come with csv (or json) output only
                argv.append("--stats")
        else:
            counters = self.counter_args(job)
            # a replayed dispatch runs once per pass: its kernel trace would count it that many times,
            # while the dispatches written from the counter records are one per dispatch
            argv += counters + ([] if "--kernel-replay-beta-enabled" in counters else ["--kernel-trace"])
        argv += self.bound(job)
        argv += ["--output-format", *formats, "-d", str(job.raw_dir), *self.output_name(job)]
        if request.attach is not None:
            main = self.attach_step(job, argv + list(request.bounds.profiler_args))
        else:
            argv += self.rank_selection(job) + [*request.bounds.profiler_args, "--"]
            main = Step(argv=job.launch.wrap(self.rank_gate(job, argv)), label=self.name)
        steps = [main]
        if converter is not None and formats == ["rocpd"]:
            command, env = converter
            steps.append(Step(argv=(sys.executable, "-I", "-S", str(HELPERS / "rocpd_convert.py"), str(job.raw_dir),
                                    "--", *command), label="rocpd convert", env=env))
        return tuple(steps)

    def counter_args(self, job: Job) -> list[str]:
        """The counter passes as this rocprofv3 takes them: repeated --pmc (SDK 1.3.0+; with kernel replay,
        where its --help lists it, all in one run) or -i input.json."""
        passes = job.counters.passes if job.counters else ()
        if job.request.attach is not None and len(passes) > int(tool_facts()["attach"]["counter_passes"]):
            name = job.counters.name if job.counters else ""
            raise unsupported(self.name, "--attach with counters",
                              f"an attached session collects one counter pass and set {name} needs {len(passes)}: "
                              "pick fewer counters (one hardware block group)")
        if counter_input_form(job.facts)["form"] == "pmc-flags":
            replay = kernel_replay(job.facts) if len(passes) > 1 and job.request.attach is None else []
            return [arg for counters in passes for arg in ("--pmc", *counters)] + replay
        return ["-i", str(job.raw_dir / INPUT_JSON)]

    def counter_inputs(self, job: Job) -> dict[str, str]:
        text = counter_input_text(counter_input_form(job.facts)["form"], job.counters.passes) if job.counters else None
        return {INPUT_JSON: text} if text else {}

    def attach_step(self, job: Job, argv: list[str]) -> Step:
        """rocprofv3 --attach PID under profilectl's attach session, which detaches it cleanly on
        Ctrl-C, --timeout, `docker stop`, the duration's end, the target's end and profilectl's own
        death: the step is stopped with SIGINT, the signal the attach tool detaches on."""
        attach = job.request.attach
        assert attach is not None
        argv += ["--attach", str(attach.pid)]
        session = [sys.executable, "-I", "-S", str(HELPERS / "attach_session.py"), "--pid", str(attach.pid)]
        if attach.duration_s is not None:
            if supports("--attach-duration-msec", job.facts):
                argv += ["--attach-duration-msec", str(max(1, round(attach.duration_s * 1000)))]
            session += ["--duration", f"{attach.duration_s:g}"]
        # AMD's attach tool detaches on SIGINT (rocprofv3-attach.py's handler calls detach) and dies
        # still attached on SIGTERM: every early stop of this step starts with SIGINT
        return Step(argv=tuple(session + ["--", *argv]), label=f"{self.name} --attach {attach.pid}",
                    stop_signal=str(tool_facts()["attach"]["stop_signal"]))

    def rank_selection(self, job: Job) -> list[str]:
        """`--ranks` as --profile-mpi-ranks where tool_selects_ranks, else profilectl's rank gate."""
        request, launch = job.request, job.launch
        if not request.ranks:
            return []
        if not launch.multi_rank or launch.placement != INSIDE:
            how = "runs one process" if not launch.multi_rank else "starts the ranks inside the profiler"
            raise unsupported(self.name, "--ranks", f"it needs a launcher that starts the profiler in each rank "
                              f"(mpirun, srun); {launch.launcher} {how}")
        return ["--profile-mpi-ranks", ranks_text(request.ranks)] if tool_selects_ranks(job.facts, request) else []

    def rank_gate(self, job: Job, argv: list[str]) -> list[str]:
        if not job.request.ranks or tool_selects_ranks(job.facts, job.request):
            return argv
        return [sys.executable, "-I", "-S", str(HELPERS / "rank_gate.py"), "--ranks", ranks_text(job.request.ranks),
                "--rank-env", ",".join(job.launch.rank_env), "--", *argv]

    def output_name(self, job: Job) -> list[str]:
        """Per-rank file names for a multi-rank job: <host>/rank<R>-<pid>_<kind>.csv (the rank from
        the launcher's variable; %rank% reads SLURM_PROCID / OMPI_COMM_WORLD_RANK / MPI_RANK itself).
        6.2 has no %hostname%: rank<R>-<pid>_<kind>.csv. A plain program keeps the default layout."""
        launch = job.launch
        if not launch.multi_rank:
            return []
        rank = "%rank%" if launch.placement == "inside" else f"%env{{{launch.rank_env[0]}}}%"
        host = "%hostname%/" if has("placeholders", "%hostname%", effective_level(job.facts)) else ""
        return ["-o", f"{host}rank{rank}-%pid%"]

    def bound(self, job: Job) -> list[str]:
        """The bounded-profiling request as this release's rocprofv3 options (or a refusal naming why)."""
        bounds, request = job.request.bounds, job.request
        version = f"rocprofv3 of {tool_level(job.facts).label()}"
        argv: list[str] = []

        def need(option: str, asked: str) -> None:
            if not supports(option, job.facts):
                raise unsupported(version, asked, f"it has no {option} (from {since('options', option)})")
        if bounds.kernel is not None:
            need("--kernel-include-regex", "--kernel")
            argv += ["--kernel-include-regex", bounds.kernel]
        exclude = [bounds.exclude_kernel] if bounds.exclude_kernel else []
        if request.service == "counters" and not request.include_collectives and \
                supports("--kernel-exclude-regex", job.facts):
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
            if request.attach is not None:
                raise unsupported(self.name, "--steps with --attach", "the step hook is loaded when a process starts; "
                                  "an attached one has none (use --duration)")
            need("--selected-regions", "--steps")
            if not job.launch.python_ranks:
                raise unsupported(self.name, "--steps", "steps are PyTorch training steps; this workload is not Python")
            argv.append("--selected-regions")
        if bounds.nvtx_range is not None:
            argv += self._range_bound(job, need)
        return argv

    def _range_bound(self, job: Job, need: Callable[[str, str], None]) -> list[str]:
        """--range NAME: rocprofv3 selects no range by name; in Python ranks profilectl's hook pauses and
        resumes it (roctxProfilerPause/Resume, --selected-regions) at record_function ranges of that name."""
        bounds = job.request.bounds
        if bounds.steps is not None:
            raise unsupported(self.name, "--range with --steps", "its one window is either the steps or the ranges")
        if job.request.attach is not None:
            raise unsupported(self.name, "--range with --attach", "the range hook is loaded when a process starts")
        need("--selected-regions", "--range")
        if not job.launch.python_ranks:
            raise unsupported(self.name, "--range", "rocprofv3 selects no ROCTx range by name; profilectl opens its "
                              "window at record_function ranges of Python ranks only (a native program can call "
                              "roctxProfilerResume/Pause itself, with --profiler-args --selected-regions)")
        return ["--selected-regions"]

    def list_counters(self, facts: Facts, run: Callable[[list[str]], CommandResult]) -> CounterListing:
        """From 7.0 `rocprofv3-avail list --pmc` (what -L itself runs); else, or when it fails,
        `rocprofv3 -L` (--list-metrics before 6.4, --list-avail after; -L in every release)."""
        avail = facts.tool("rocprofv3-avail")
        if avail and has("commands", "rocprofv3-avail", effective_level(facts)):
            argv = [avail.path, "list", "--pmc"]
            listing = counter_listing.rocprofv3_avail(run(argv).output, "rocprofv3-avail list --pmc")
            if listing.names:
                return listing
        argv = [self.require_tool(facts).path, "-L"]
        result = run(argv)
        listing = counter_listing.rocprofv3(result.output, "rocprofv3 -L")
        return listing if listing.names or result.ok else CounterListing("rocprofv3 -L", ran=False)
