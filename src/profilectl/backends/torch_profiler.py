"""torch.profiler: traces and operator/kernel tables for PyTorch workloads on ROCm, CUDA or CPU.

The workload runs as the user wrote it, launcher included: profilectl's start-up hook
(rank_startup/sitecustomize.py, on PYTHONPATH) starts torch.profiler in every rank the launcher
starts (torchrun's workers, mpirun's or srun's tasks, or the one process of a plain run) once it
imports torch, and each rank exports its own Chrome trace, named by host, rank and pid. --steps A:B
becomes torch.profiler's schedule, stepped at each optimizer.step() (or profilectl.step()); --range
NAME runs it inside each record_function range of that name instead (one trace per range).

What it costs (bench/overhead.py, docs/validation.md): every profiled step runs slower, and the
trace is written at the end. So without --steps the trace covers the start-up and the first
FIRST_STEPS steps, the rest of the loop runs unprofiled (`--steps all`: every step), torch.profiler's
optional records (shapes, stacks, memory, flops, modules, accumulated events) stay off, and the
trace is exported once the workload ended, never inside its loop; where torch can (>= 2.4), the
window's end pauses collection and the profiler stops at exit, not inside the loop. The options go to the start-up
hook as PROFILECTL_TORCH_OPTIONS (JSON), shown by --dry-run; `--env PROFILECTL_TORCH_OPTIONS=...`
replaces them (e.g. '{"record_shapes": true, "with_stack": true}').
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from profilectl.backends.base import Backend, Job, Step, StepResult, rank_hook_env, unsupported
from profilectl.facts import Facts, Torch, Verdict
from profilectl.formats.rank_status import RankStatusReader
from profilectl.model.tables import Tables
from profilectl.formats.torch_memory import TorchMemoryReader
from profilectl.formats.torch_trace import ChromeTraceReader
from profilectl.launchers import interpreter
from profilectl.probe import sources
from profilectl.probe.machine import Machine
from profilectl.request import Request


# Without --steps, the trace records from the start through this many steps: start-up, the warm-up
# steps and a steady state, at the cost of these steps only (measured: bench/overhead.py).
FIRST_STEPS = 5
OPTIONS_ENV = "PROFILECTL_TORCH_OPTIONS"
# How a window's end is handled inside the loop: "pause" pauses CPU and CUDA collection there
# (toggle_collection_dynamic, torch >= 2.4) and stops the profiler at exit; older torch, or "stop",
# stops it at the window's end as torch.profiler's schedule does. Measured on an H100 (bench/overhead.py,
# docs/validation.md "window that pauses"): the hook's time inside the loop 0.23 s -> 0.007 s for 5
# steps, the same kernels, operators and steps in the trace; the stop (0.28 s) moves to the exit.
WINDOW_CLOSE = "pause"


# trace --memory: torch.cuda.memory._record_memory_history's bound on the allocator events it keeps
# (torch's own default); the snapshot of the last this many is dumped at exit and at an OOM.
MEMORY_ENTRIES = 100_000


def profiler_options(request: Request) -> dict[str, object]:
    """torch.profiler's switches as the start-up hook applies them: each optional record off (each
    costs time in every operator, or a pass over every event at the stop) unless asked (--shapes), the
    default window, and torch's CUDA memory history where --memory asked for it."""
    options: dict[str, object] = {
        "record_shapes": request.record_shapes, "with_stack": False, "profile_memory": False, "with_flops": False,
        "with_modules": False, "acc_events": False,
        "first_steps": None if request.bounds.all_steps or request.bounds.steps else FIRST_STEPS,
        "window_close": WINDOW_CLOSE}
    if request.memory_history:
        options["memory_history"] = MEMORY_ENTRIES
    return options


def workload_torch(facts: Facts, request: Request) -> Torch:
    """PyTorch as the workload's own interpreter has it: the probe looked at `python3` on PATH,
    but `/usr/bin/python3 train.py` or a torchrun of another environment may differ."""
    launch = request.launch
    named = launch.launcher_argv[0] if launch.launcher == "torchrun" else launch.program[0] if launch.program else ""
    if named in ("python3", "python"):
        return facts.torch  # the interpreter the probe looked at: python3 on PATH
    python = interpreter(launch)
    probed = facts.torch.python
    # the same path, not the same binary: a virtual environment's python links to the system one
    # but sees other packages (Debian's python3-torch is not in a venv made without system packages)
    if python is None or (probed and os.path.abspath(python) == os.path.abspath(probed)):
        return facts.torch
    return sources.torch(Machine(), python)


TORCH_MISSING = "torch-missing"  # the workload's Python has no PyTorch (plan.py says which image has it)


class TorchProfiler(Backend):
    name = "torch"
    services = frozenset({"trace", "profile"})
    readers = (ChromeTraceReader(), RankStatusReader(), TorchMemoryReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if not request.is_python:
            return Verdict(False, "the workload's processes are not Python programs, so torch.profiler cannot run "
                           "inside them")
        torch = workload_torch(facts, request)
        if not torch.version:
            return Verdict(False, f"PyTorch is not installed for the workload's Python ({torch.python or 'python3'})",
                           "pip install torch", cause=TORCH_MISSING)
        where = {"rocm": "ROCm GPU", "cuda": "CUDA GPU", "cpu": "CPU only"}.get(torch.backend or "", "?")
        ranks = f", every rank {request.launch.launcher} starts" if request.launch.multi_rank else ""
        return Verdict(True, f"torch.profiler (PyTorch {torch.version}, {where}{ranks})")

    def traces_gpu(self, facts: Facts) -> bool:
        return facts.torch.backend in ("rocm", "cuda")

    def steps(self, job: Job) -> tuple[Step, ...]:
        bounds = job.request.bounds
        for option in bounds.kernel_selection:
            raise unsupported("torch.profiler", option, "it records every kernel of the profiled steps; bound "
                              "it with --steps, or use rocprofv3 / Nsight Compute")
        if bounds.nvtx_range is not None and bounds.steps is not None:
            raise unsupported("torch.profiler", "--range with --steps", "its window is either the steps or the "
                              "record_function ranges; give one")
        if bounds.profiler_args:
            raise unsupported("torch.profiler", "--profiler-args", "it is started inside the workload, not as a "
                              "command")
        return (Step(argv=job.request.workload, label=self.name),)

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        env.update(rank_hook_env(job, torch_out=Path(job.raw_dir)))
        env[OPTIONS_ENV] = json.dumps(profiler_options(job.request), separators=(",", ":"))
        # The NCCL/RCCL inspector plugin, where the run turns it on (--env NCCL_INSPECTOR_ENABLE=1): its
        # JSON lines go into the run's raw/, where the report reads them (formats/nccl_inspector.py)
        overrides = job.request.env_overrides
        if overrides.get("NCCL_INSPECTOR_ENABLE", "0").strip() not in ("", "0") and \
                "NCCL_INSPECTOR_DUMP_DIR" not in overrides:
            env["NCCL_INSPECTOR_DUMP_DIR"] = str(Path(job.raw_dir) / "nccl-inspector")
        return env

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        if not (request.bounds.steps or request.bounds.all_steps):
            notes.append(f"torch.profiler records the start-up and the first {FIRST_STEPS} steps, then the loop runs "
                         f"unprofiled (a workload without steps is recorded to its end); --steps all records every "
                         f"step, --steps A:B a window")
        return notes

    def record(self, raw_dir: Path, results: list[StepResult]) -> None:
        copy_workload_traces(raw_dir)

    def read(self, raw_dir: Path) -> Tables:
        tables = super().read(raw_dir)
        note = workload_profiler_note(raw_dir)
        return dataclasses.replace(tables, notes=tables.notes + (note,)) if note else tables


# A workload that runs torch.profiler itself: profilectl's hook stepped aside (one Kineto profiler per
# process) and noted in the rank's status file where the workload exported its traces.
WORKLOAD_TRACES = "workload-traces"
COLLISION = "Can't disable Kineto profiler when it's not running"
WAYS_OUT = ("read its own traces with `profilectl report <its trace folder>`, or let profilectl's profiler run "
            "alone (turn the workload's torch.profiler off)")


def copy_workload_traces(raw_dir: Path) -> list[Path]:
    """The traces the workload exported itself, copied (never moved: they are the user's) into
    raw/workload-traces/ under names that keep their rank, so the run directory reads alone."""
    from profilectl.files import read_json
    copied = []
    for status_path in sorted(raw_dir.glob("rank-*.status.json")):
        try:
            doc = read_json(status_path)
        except Exception:  # a broken status file is the rank-status reader's to report
            continue
        if not isinstance(doc, dict):
            continue
        for written in doc.get("own_traces") or []:
            source = Path(str(written))
            if not source.is_file() or raw_dir in source.parents:
                continue
            target = raw_dir / WORKLOAD_TRACES / f"{doc.get('host') or 'host'}-rank{doc.get('rank')}-{source.name}"
            target.parent.mkdir(exist_ok=True)
            shutil.copy2(source, target)
            copied.append(target)
    return copied


def workload_profiler_note(raw_dir: Path, stderr_text: str = "") -> str | None:
    """One line when the workload ran torch.profiler itself (its status files say so, or the
    collision's error is in its stderr), with the two ways out."""
    from profilectl.files import read_json
    steps, traces = [], []
    for status_path in sorted(raw_dir.glob("rank-*.status.json")) if raw_dir.is_dir() else []:
        try:
            doc = read_json(status_path)
        except Exception:
            continue
        if isinstance(doc, dict) and doc.get("own_profiler_step") is not None:
            steps.append(int(doc["own_profiler_step"]))
            traces += [str(p) for p in doc.get("own_traces") or []]
    if not steps and COLLISION not in stderr_text:
        return None
    where = (f"; profilectl stepped aside at step {min(steps)} and read the {len(traces)} trace(s) it exported "
             f"({', '.join(sorted({str(Path(t).parent) for t in traces}))})" if traces else
             "; the paths of its traces are not known" if steps else
             f": the two profilers collided (\"{COLLISION}\")")
    return f"the workload runs torch.profiler itself{where}: {WAYS_OUT}"
