"""The interface every profiler backend implements; adding a profiler is adding one module.

A backend knows four things about its tool: whether it can serve a service here (`available`), the
exact commands to run (`steps`: argv lists, never shell strings), the files its tool writes
(`readers`), and, for the backends that measure the run themselves, what to record from it
(`record`).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from profilectl import countersets
from profilectl.countersets import CounterPlan, CounterSet
from profilectl.errors import UsageError
from profilectl.facts import Facts, Tool, Verdict
from profilectl.formats.counter_listing import CounterListing
from profilectl.formats.reader import Reader, read_path
from profilectl.privilege import TOOL, WORKLOAD, Need
from profilectl.probe.machine import CommandResult
from profilectl.model.tables import Tables
from profilectl.launchers import Launch
from profilectl.request import Request

VENDOR_NAMES = {"amd": "AMD", "nvidia": "NVIDIA"}
PMC_TEXT_FILE = "input.txt"  # a counter input file of `pmc:` lines (legacy rocprof), in the phase's raw folder
NO_VENDOR_GPU = "no-vendor-gpu"  # the cause of "this backend's vendor has no GPU here"


@dataclass(frozen=True)
class Step:
    """One process to start. `timed` steps are the repetitions the timing backend measures.
    `stop_signal`: what its process tree gets first whenever profilectl stops it early (--timeout,
    profilectl's own SIGTERM or death; Ctrl-C always sends SIGINT), SIGKILL following after the
    grace. The backend picks it: a tool that lets go of something only on one signal (AMD's attach
    tools detach on SIGINT, and die attached on SIGTERM) names that signal."""
    argv: tuple[str, ...]
    label: str
    env: dict[str, str] = field(default_factory=dict)
    timed: bool = False
    warmup: bool = False
    stop_signal: str = "SIGTERM"


@dataclass(frozen=True)
class StepResult:
    """One step after it ran: its label, the command as written down (secrets redacted), exit code, seconds, and
    whether it timed out or was interrupted."""
    label: str
    argv: tuple[str, ...]
    returncode: int | None
    seconds: float
    timed: bool = False
    warmup: bool = False
    timed_out: bool = False
    interrupted: bool = False


@dataclass(frozen=True)
class SizedRuns:
    """The runs a backend adds once the first run(s) measured the workload (profile's sized repeats)."""
    steps: tuple[Step, ...]
    first_is_run: bool = False  # the last run done (a warm-up) counts as the one timed run
    note: str = ""
    replaces: str = ""  # the plan's note that `note` makes redundant (how runs would be sized: now they were)


@dataclass(frozen=True)
class Job:
    """Everything a backend needs to write its commands, decided by the plan."""
    request: Request
    facts: Facts
    raw_dir: Path  # where the tool writes its own files
    counters: CounterPlan | None = None

    @property
    def launch(self) -> Launch:
        return self.request.launch


RANK_STARTUP = Path(__file__).with_name("rank_startup")  # sitecustomize.py: reaches every Python rank


def step_marks_env(job: Job) -> dict[str, str]:
    """Environment that starts profilectl's hook in every Python rank of the job (and only there),
    doing nothing but mark the steps' ends (with PROFILECTL_STATUS_OUT: into a folder)."""
    launch = job.launch
    existing = os.environ.get("PYTHONPATH", "")
    env = {"PYTHONPATH": str(RANK_STARTUP) + (os.pathsep + existing if existing else ""),
           "PROFILECTL_RANK_ENV": ",".join(launch.rank_env)}
    if launch.local_rank_env:  # which GPU a rank most likely uses, for the live view
        env["PROFILECTL_LOCAL_RANK_ENV"] = ",".join(launch.local_rank_env)
    if not launch.multi_rank:
        env["PROFILECTL_SINGLE"] = "1"
    return env


def rank_hook_env(job: Job, torch_out: Path | None = None, step_action: str | None = None) -> dict[str, str]:
    """Environment that starts profilectl's hook in every Python rank of the job (and only there):
    torch.profiler per rank (torch_out) and/or a step window driving the profiler (step_action)."""
    env = step_marks_env(job)
    if torch_out is not None:
        env["PROFILECTL_TORCH_OUT"] = str(torch_out)
    steps = job.request.bounds.steps
    if steps is not None:
        env["PROFILECTL_STEPS"] = f"{steps[0]}:{steps[1]}"
        env["PROFILECTL_STEP_ACTION"] = step_action or "torch"
    env.update(range_hook_env(job, step_action))
    return env


def range_hook_env(job: Job, step_action: str | None = None) -> dict[str, str]:
    """--range NAME for a Python workload: the hook's window follows record_function ranges of that
    name (torch-range: a torch.profiler per range; roctx / cuda-profiler: the tool's own window)."""
    name = job.request.bounds.nvtx_range
    if name is None:
        return {}
    return {"PROFILECTL_RANGE": name, "PROFILECTL_STEP_ACTION": step_action or "torch-range"}


def amd_counter_needs(facts: Facts, request: Request, tool: str) -> tuple[Need, ...]:
    """AMD's profilers collect counters inside the workload's process (the tool library is loaded
    into it); in a container the GPU is locked for counter collection only with CAP_PERFMON (where
    the engine could grant it) or CAP_SYS_ADMIN. Attaching needs CAP_SYS_PTRACE in AMD's attach tool
    (its own process) where Yama or another uid requires it (probe/attach.py)."""
    needs: list[Need] = []
    counting = request.service == "counters" or request.preset == "pc-sampling"
    if counting and facts.host.in_container:
        held = set(facts.host.effective_capabilities)
        cap = "PERFMON" if "PERFMON" in held else "SYS_ADMIN"
        needs.append(Need(cap, WORKLOAD, f"{tool} reads counters inside the workload's process, and in a container "
                                         f"the GPU is locked for counter collection only with CAP_{cap}"))
    attach = request.attach
    if attach is not None:
        owner = request.run_for[0] if request.run_for else facts.host.uid
        if attach.ptrace_scope in (1, 2) or (attach.uid is not None and attach.uid != owner):
            needs.append(Need("SYS_PTRACE", TOOL, f"{tool}'s attach tool traces process {attach.pid} (ptrace)"))
    return tuple(needs)


def unsupported(backend: str, option: str, why: str) -> UsageError:
    return UsageError(f"{backend} cannot honour {option}: {why}")


class Backend(ABC):
    name: ClassVar[str]
    tool_name: ClassVar[str | None] = None
    services: ClassVar[frozenset[str]] = frozenset()
    # A profiler wraps the workload: its own failures (aborts, signals) are told apart from the
    # workload's. Timing and the torch wrapper run the workload itself.
    is_profiler: ClassVar[bool] = False
    # The GPU vendor this tool profiles ("amd", "nvidia"); None: it runs anywhere.
    vendor: ClassVar[str | None] = None
    # The readers of the files this backend's tool writes (also used by `report` on bare folders).
    readers: ClassVar[tuple[Reader, ...]] = ()
    # Selects the ranks of a multi-rank job to profile (`--ranks`); others refuse the option.
    selects_ranks: ClassVar[bool] = False
    # Each counter pass re-runs the application (AMD's `pmc:` lines): as few passes as the counter
    # blocks allow. Otherwise the tool collects every counter in one run (it replays kernels itself).
    pass_per_run: ClassVar[bool] = False
    # Environment for stable numbers, set by default (users override with --env KEY=VALUE).
    default_env: ClassVar[dict[str, str]] = {"PYTORCH_TUNABLEOP_ENABLED": "0"}

    def tool(self, facts: Facts) -> Tool | None:
        return facts.tool(self.tool_name)

    def require_tool(self, facts: Facts) -> Tool:
        """The tool, once `available` said yes (a plan never asks a backend that has no tool)."""
        tool = self.tool(facts)
        if tool is None:
            raise RuntimeError(f"{self.name}: steps requested without its tool")
        return tool

    @abstractmethod
    def available(self, facts: Facts, request: Request) -> Verdict:
        """Can this backend serve request.service on this machine? Says why, and the fix."""

    @abstractmethod
    def steps(self, job: Job) -> tuple[Step, ...]:
        """The commands to run, writing the tool's own files under job.raw_dir."""

    def capabilities(self, facts: Facts, request: Request) -> tuple[Need, ...]:
        """The capabilities this backend's processes need here for this request, and who holds them
        (privilege.py decides whether they may be kept when root runs for another user)."""
        return ()

    def record(self, raw_dir: Path, results: list[StepResult]) -> None:
        """Write files that come from the run itself rather than from a tool (timing)."""

    def sized_steps(self, job: Job, done: list[StepResult]) -> SizedRuns | None:
        """Runs to add once the planned steps measured the workload (None: the plan's steps are all)."""
        return None

    def read(self, raw_dir: Path) -> Tables:
        """The tables of this backend's files under raw_dir (empty Tables when it wrote none)."""
        if not raw_dir.is_dir():
            return Tables()
        return read_path(raw_dir, self.readers, required=False)

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        """What the plan should tell the user about this backend's choices and this machine's
        warnings for it: counters that will read zero, a workload with another ROCm runtime."""
        notes = []
        counters = facts.checks.get(f"{self.vendor}_counters") if self.vendor else None
        if request.service == "counters" and counters is not None and counters.available and counters.cause:
            notes.append(f"{counters.reason}" + (f". Fix: {counters.fix}" if counters.fix else ""))
        runtime = facts.checks.get("torch_runtime")
        if self.vendor == "amd" and request.is_python and runtime is not None and not runtime.available:
            notes.append(f"{runtime.reason}. Fix: {runtime.fix}")
        return notes

    def list_counters(self, facts: Facts, run: Callable[[list[str]], CommandResult]) -> CounterListing | None:
        """The GPU's counters as this tool lists them (running its listing commands through `run`),
        for validating names before a run; None when the tool has no listing."""
        return None

    def counter_key(self, name: str) -> str:
        """A requested counter name as the tool's listing spells it (for validation)."""
        return name

    def kernel_timing(self, request: Request) -> str | None:
        """How the tool timed the kernels where the request says more than its files do (Nsight
        Compute's clock control); None: what the files say stands."""
        return None

    def counter_passes(self, counter_set: CounterSet) -> tuple[tuple[str, ...], ...]:
        """How the set's counters are collected: one pass, unless the tool re-runs the app per pass."""
        if self.pass_per_run:
            return counter_set.explicit_passes or countersets.split_passes(counter_set.counters)
        return (counter_set.counters,)

    def input_file(self, passes: tuple[tuple[str, ...], ...]) -> str | None:
        """The counter input file for these passes, if the tool takes one."""
        return None

    def counter_inputs(self, job: Job) -> dict[str, str]:
        """The files the plan writes into the phase's raw folder before the run: name -> text
        (by default the `pmc:` text of input_file)."""
        text = self.input_file(job.counters.passes) if job.counters else None
        return {PMC_TEXT_FILE: text} if text else {}

    def environment(self, job: Job) -> dict[str, str]:
        env = dict(self.default_env)
        if job.request.serialize:
            env.update({"HIP_LAUNCH_BLOCKING": "1", "CUDA_LAUNCH_BLOCKING": "1"})
        return env

    def gpu_gate(self, facts: Facts) -> Verdict | None:
        """The refusal when this backend's GPU is absent or cannot be opened; None when it can run."""
        if self.vendor is None:
            return None
        if facts.first_gpu(self.vendor) is None:
            return Verdict(False, f"no {VENDOR_NAMES[self.vendor]} GPU found", cause=NO_VENDOR_GPU)
        devices = facts.checks.get(f"{self.vendor}_devices")
        return devices if devices is not None and not devices.available else None

    def counter_gate(self, facts: Facts) -> Verdict | None:
        """The probe's refusal of hardware counters for this vendor (live probe first), if any."""
        verdict = facts.checks.get("live_counters") or facts.checks.get(f"{self.vendor}_counters")
        return verdict if verdict is not None and not verdict.available else None

    def traces_gpu(self, facts: Facts) -> bool:
        """Does this backend's trace show GPU activity (kernels, copies) on this machine?"""
        return self.vendor is not None and "trace" in self.services

    def unavailable_unless_service(self, request: Request) -> Verdict | None:
        if request.service not in self.services:
            return Verdict(False, f"{self.name} does not provide the {request.service} service")
        return None
