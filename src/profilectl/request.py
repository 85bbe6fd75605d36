"""What the user asked for: the service, the workload and the options, before any planning."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from profilectl import data, settings
from profilectl.errors import UsageError

if TYPE_CHECKING:
    from profilectl.launchers import Launch

SERVICES = ("profile", "counters", "trace")
WORKLOAD_ENV = "PROFILECTL_WORKLOAD"


@dataclass(frozen=True)
class Bounds:
    """Bounded profiling, in one vocabulary for every backend (each translates it to its own flags
    or refuses what it cannot honour)."""
    kernel: str | None = None  # regular expression: only these kernels
    exclude_kernel: str | None = None  # regular expression: not these kernels
    launch_skip: int | None = None
    launch_count: int | None = None
    steps: tuple[int, int] | None = None  # steps A..B-1 of a PyTorch training loop
    nvtx_range: str | None = None  # an NVTX range name
    profiler_args: tuple[str, ...] = ()  # appended to the profiler's argv as written
    # `--steps all`: torch.profiler records every step (by default a trace records the first steps only)
    all_steps: bool = False

    @property
    def any(self) -> bool:
        """A bound is set (`--steps all` is none: it asks for everything)."""
        return any(getattr(self, f.name) not in (None, ()) for f in dataclasses.fields(self) if f.name != "all_steps")

    @property
    def launch_window(self) -> bool:
        return self.launch_skip is not None or self.launch_count is not None

    @property
    def kernel_selection(self) -> tuple[str, ...]:
        """The options given that choose kernels or launches (what a tracer of every kernel refuses)."""
        return tuple(option for option, value in (("--kernel", self.kernel), ("--exclude-kernel", self.exclude_kernel),
                                                  ("--launch-skip", self.launch_skip),
                                                  ("--launch-count", self.launch_count)) if value is not None)


@dataclass(frozen=True)
class Attach:
    """`--attach PID`: profile a process that is already running instead of starting the workload.
    The target as /proc showed it when the request was made (probe/attach.py reads it)."""
    pid: int
    duration_s: float | None = None  # detach after this long (None: at Ctrl-C, --timeout, or the target's end)
    exists: bool = True
    uid: int | None = None
    cmdline: tuple[str, ...] = ()
    attach_env: bool | None = None  # ROCP_TOOL_ATTACH on in its environment, as the runtime reads it (None: unreadable)
    ptrace_scope: int | None = None  # Yama's scope at that moment (None: no Yama)


@dataclass(frozen=True)
class Request:
    """What the user asked for: the service, the workload and every option that shapes the plan."""
    service: str
    workload: tuple[str, ...]
    workload_source: str = "argument"  # argument | environment | default
    backend: str | None = None  # forced with --backend
    counter_set: str = "basic"
    preset: str = "lightweight"
    fallback: bool = False
    timeout_s: float | None = None
    serialize: bool = False
    repeat: int | None = None  # timed runs of `profile`; None: sized to the workload (backends/timing.py)
    warmup: int | None = None  # untimed runs first; None: one (with a sized repeat, the run that sizes it)
    torch_pass: str = "auto"  # profile's torch.profiler phase: auto (when cheap), always, never
    env_overrides: dict[str, str] = field(default_factory=dict)
    # Nsight Compute: base locks the clocks to base during replay (ncu's default: repeatable counter
    # values; kernels run longer than in a trace), none leaves them as the GPU sets them.
    clock_control: str = "base"
    bounds: Bounds = field(default_factory=Bounds)
    # counters: replay NCCL/RCCL kernels too (by default they are left out: replaying a collective
    # waits for ranks that are not replaying, and the job hangs)
    include_collectives: bool = False
    # sample GPU power, memory, clocks, temperature and utilisation while the run executes (--no-sample: off)
    sample: bool = True
    # --live (profile, trace): per-rank step times, GPU busy and power and the straggler while the job runs
    live: bool = False
    # trace --shapes: torch.profiler records operators' input shapes (the operator roofline); --memory: torch's
    # CUDA memory history, dumped as a snapshot at exit and at an out-of-memory error (torch.profiler only)
    record_shapes: bool = False
    memory_history: bool = False
    attach: Attach | None = None  # --attach PID (trace, counters)
    ranks: tuple[int, ...] = ()  # --ranks 0-3,8: only these ranks of a multi-rank job are profiled
    # write secret-looking values of the workload's arguments and environment as <redacted>
    # (profiling/redaction.yaml; --no-redact: off)
    redact: bool = True
    # root only: the profiler and the workload run as root although the run is for another user (privilege.py)
    as_root: bool = False
    # (uid, gid) of the user the run is for: the owner of the traces folder or $PROFILECTL_HOST_UID/GID
    run_for: tuple[int, int] | None = None

    @functools.cached_property
    def launch(self) -> "Launch":
        """The workload as its launcher runs it (torchrun, mpirun, srun, or a plain program)."""
        from profilectl import launchers
        return launchers.recognise(self.workload)

    @property
    def is_python(self) -> bool:
        """Every process that does the work is a Python interpreter (a plain one, or each rank)."""
        return self.launch.python_ranks


def hip_workload() -> str | None:
    """The HIP matmul the image builds with hipcc (docker/Dockerfile), if this is such an image."""
    candidate = (settings.get_path("PROFILECTL_HOME") or Path("/opt/profilectl")) / "bin" / "hip_matmul"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def default_workload(prefer_hip: bool = False) -> tuple[str, ...]:
    """The built-in workload: the HIP binary on an AMD GPU without ROCm PyTorch, else matmul.py."""
    hip = hip_workload() if prefer_hip else None
    if hip:
        return (hip,)
    return ("python3", str(data.require("workloads/matmul.py")))


def resolve_workload(argv: list[str] | tuple[str, ...], prefer_hip: bool = False) -> tuple[tuple[str, ...], str]:
    """The workload argv: after `--` on the command line, else $PROFILECTL_WORKLOAD, else built-in."""
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv:
        return tuple(argv), "argument"
    from_env = (settings.get_str(WORKLOAD_ENV) or "").strip()
    if from_env:
        try:
            return tuple(shlex.split(from_env)), "environment"
        except ValueError as exc:
            raise UsageError(f"${WORKLOAD_ENV} is not a valid command line: {exc}") from None
    return default_workload(prefer_hip), "default"


def parse_bounds(kernel: str | None = None, exclude_kernel: str | None = None, launch_skip: int | None = None,
                 launch_count: int | None = None, steps: str | None = None, nvtx_range: str | None = None,
                 profiler_args: str | None = None) -> Bounds:
    """The bounded-profiling options as typed, checked values (a mistake is a UsageError, exit 2)."""
    for option, pattern in (("--kernel", kernel), ("--exclude-kernel", exclude_kernel)):
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from None
    if launch_skip is not None and launch_skip < 0:
        raise UsageError("--launch-skip must be 0 or more")
    if launch_count is not None and launch_count < 1:
        raise UsageError("--launch-count must be at least 1")
    window = None
    every_step = steps is not None and steps.strip().lower() == "all"
    if steps is not None and not every_step:
        match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", steps)
        if not match:
            raise UsageError(f"--steps expects A:B (steps A to B-1, counted from 0) or all, got {steps!r}")
        first, last = int(match.group(1)), int(match.group(2))
        if first >= last:
            raise UsageError(f"--steps {steps}: the first step must come before the end (A < B)")
        window = (first, last)
    if nvtx_range is not None and not nvtx_range.strip():
        raise UsageError("--range needs a range name")
    try:
        extra = tuple(shlex.split(profiler_args)) if profiler_args else ()
    except ValueError as exc:
        raise UsageError(f"--profiler-args is not a valid command line: {exc}") from None
    return Bounds(kernel=kernel, exclude_kernel=exclude_kernel, launch_skip=launch_skip, launch_count=launch_count,
                  steps=window, nvtx_range=nvtx_range, profiler_args=extra, all_steps=every_step)


def parse_ranks(spec: str | None) -> tuple[int, ...]:
    """`--ranks 0-3,8` -> (0, 1, 2, 3, 8): one vocabulary for every backend and release."""
    if spec is None:
        return ()
    ranks: set[int] = set()
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise UsageError(f"--ranks expects ranks and ranges such as 0-3,8, got {spec!r}")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if first > last:
            raise UsageError(f"--ranks {spec}: the range {part.strip()} runs backwards")
        ranks.update(range(first, last + 1))
    return tuple(sorted(ranks))


def absent_ranks(request: "Request") -> tuple[int, ...]:
    """The ranks of --ranks that the job does not start, where its launcher's command line says how
    many it starts (mpirun -np N, srun -n N: ranks 0..N-1); () where it does not say. One check for
    every release: rocprofv3's --profile-mpi-ranks (7.2+) stops every rank with a fatal error when
    the list names a rank beyond the world size, and profilectl's rank gate (before 7.2) would
    simply run the others."""
    from profilectl.launchers.base import INSIDE  # the count a launcher gives is the whole job only there
    launch = request.launch
    if not request.ranks or launch.placement != INSIDE or launch.ranks is None:
        return ()
    return tuple(r for r in request.ranks if r >= launch.ranks)


def ranks_text(ranks: tuple[int, ...]) -> str:
    """(0, 1, 2, 3, 8) -> '0-3,8' (rocprofv3's --profile-mpi-ranks takes the same form)."""
    parts: list[str] = []
    for rank in ranks:
        if parts and _last(parts[-1]) == rank - 1:
            first = parts[-1].split("-")[0]
            parts[-1] = f"{first}-{rank}"
        else:
            parts.append(str(rank))
    return ",".join(parts)


def _last(part: str) -> int:
    return int(part.split("-")[-1])


def parse_env_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out
