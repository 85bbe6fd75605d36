"""The interface every profiler backend implements; adding a profiler is adding one module.

A backend knows three things about its tool: whether it can serve a service here (`available`),
the exact commands to run (`steps`, argv lists, never shell strings), and how to turn the files it
wrote into normalized tables (`collect`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from profilectl.formats import FormatError, detect
from profilectl.probe.report import EnvReport, Tool, Verdict
from profilectl.request import Request

VENDOR_NAMES = {"amd": "AMD", "nvidia": "NVIDIA"}
NO_VENDOR_GPU = "no-vendor-gpu"  # the cause of "this backend's vendor has no GPU here"


@dataclass
class Step:
    """One process to start. `timed` steps are the repetitions the timing backend measures."""
    argv: list[str]
    label: str
    env: dict[str, str] = field(default_factory=dict)
    timed: bool = False
    warmup: bool = False


@dataclass
class Collected:
    """What a backend read back from its raw files."""
    tables: dict[str, list[dict]] = field(default_factory=dict)  # name -> rows
    trace_file: str | None = None  # relative to the run dir; opens in Perfetto
    notes: list[str] = field(default_factory=list)
    produced_output: bool = True


class Backend(ABC):
    name: ClassVar[str]
    tool_name: ClassVar[str | None] = None
    services: ClassVar[frozenset[str]] = frozenset()
    # A profiler wraps the workload: its own failures (aborts, signals) are told apart from the
    # workload's. Timing and the torch wrapper run the workload itself.
    is_profiler: ClassVar[bool] = False
    # The GPU vendor this tool profiles ("amd", "nvidia"); None: it runs anywhere.
    vendor: ClassVar[str | None] = None
    # Environment for stable numbers, set by default (users override with --env KEY=VALUE).
    default_env: ClassVar[dict[str, str]] = {"PYTORCH_TUNABLEOP_ENABLED": "0"}

    def tool(self, env: EnvReport) -> Tool | None:
        return env.tool(self.tool_name) if self.tool_name else None

    @abstractmethod
    def available(self, env: EnvReport, request: Request) -> Verdict:
        """Can this backend serve request.service on this machine? Says why, and the fix."""

    @abstractmethod
    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        """The commands to run, writing the tool's own files under raw_dir."""

    @abstractmethod
    def collect(self, raw_dir: Path, request: Request, results: list["StepResult"]) -> Collected:
        """Reads raw_dir into normalized tables."""

    def plan_notes(self, request: Request, env: EnvReport) -> list[str]:
        """What the plan should tell the user about this backend's choices (e.g. dropped options)."""
        return []

    def list_counters_argv(self, env: EnvReport) -> list[str] | None:
        """The command that lists the GPU's counters, for validation before a run; None: cannot."""
        return None

    def parse_counter_list(self, output: str) -> set[str]:
        return set()

    def counter_key(self, name: str) -> str:
        """A requested counter name as the tool's listing spells it (for validation)."""
        return name

    def counter_passes(self, counter_set) -> list[list[str]]:
        """How the set's counters are collected: one pass, unless the tool re-runs the app per pass."""
        return [counter_set.counters]

    def input_file(self, passes: list[list[str]]) -> str | None:
        """The counter input file for these passes, if the tool takes one."""
        return None

    def environment(self, request: Request) -> dict[str, str]:
        env = dict(self.default_env)
        if request.serialize:
            env.update({"HIP_LAUNCH_BLOCKING": "1", "CUDA_LAUNCH_BLOCKING": "1"})
        return env

    def gpu_gate(self, env: EnvReport) -> Verdict | None:
        """The refusal when this backend's GPU is absent or cannot be opened; None when it can run."""
        if self.vendor is None:
            return None
        if env.first_gpu(self.vendor) is None:
            return Verdict(False, f"no {VENDOR_NAMES[self.vendor]} GPU found", cause=NO_VENDOR_GPU)
        devices = env.checks.get(f"{self.vendor}_devices")
        return devices if devices is not None and not devices.available else None

    def counter_gate(self, env: EnvReport) -> Verdict | None:
        """The probe's refusal of hardware counters for this vendor (live probe first), if any."""
        verdict = env.checks.get("live_counters") or env.checks.get(f"{self.vendor}_counters")
        return verdict if verdict is not None and not verdict.available else None

    def traces_gpu(self, env: EnvReport) -> bool:
        """Does this backend's trace show GPU activity (kernels, copies) on this machine?"""
        return self.vendor is not None and "trace" in self.services

    def unavailable_unless_service(self, request: Request) -> Verdict | None:
        if request.service not in self.services:
            return Verdict(False, f"{self.name} does not provide the {request.service} service")
        return None


def read_outputs(raw_dir: Path) -> Collected:
    """A profiler's raw folder, read by the same readers as `profilectl report` (formats/detect),
    so a run's tables and a report of the same files can never disagree."""
    try:
        sources = detect.detect(raw_dir)
    except FormatError:  # nothing recognised (or no folder): the tool wrote no readable output
        return Collected(produced_output=False)
    out = Collected(tables=detect.read(sources))
    traces = detect.trace_files(raw_dir, sources)
    if traces:
        out.trace_file = str(traces[0].relative_to(raw_dir.parent))
        if len(traces) > 1:
            out.notes.append(f"{len(traces)} Perfetto traces (one per process) under {raw_dir.name}/")
    out.produced_output = bool(out.tables or traces)
    return out


@dataclass
class StepResult:
    label: str
    argv: list[str]
    returncode: int | None
    seconds: float
    timed: bool = False
    warmup: bool = False
    timed_out: bool = False
    interrupted: bool = False
