"""Nsight Systems (nsys) for tracing any CUDA program on NVIDIA GPUs: a CUDA C++ binary, JAX, Julia,
llama.cpp, as well as Python, with CUDA API calls, kernels, copies and NVTX ranges.

`nsys profile -t <preset's list> -o <name> [capture range] <program>`, then the SQLite export of each
report (`nsys export --type sqlite`, tool_helpers/nsys_export.py) so that the run reads anywhere.
Under a launcher each rank runs its own nsys (mpirun/srun: before the rank's program; torchrun: its
workers started with --no_python as `nsys profile ... <python> <script>`), and each report is named
`<host>-rank<R>-<pid>` through nsys's %h, %q{ENV} and %p (the rank variable per launcher:
profiling/tools/nsys.yaml `rank_names`). --range NAME is an NVTX capture range; --steps A:B is one
too: profilectl's rank hook opens an NVTX range over the steps' window. Facts with their sources:
profiling/tools/nsys.yaml.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from profilectl import data
from profilectl.backends.base import Backend, Job, Step, rank_hook_env, unsupported
from profilectl.errors import FormatError, ProfilectlError
from profilectl.facts import Facts, Verdict
from profilectl.formats.nsys_sqlite import NsysReader
from profilectl.model.tables import Tables
from profilectl.launchers import Launch, interpreter
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

HELPERS = Path(__file__).with_name("tool_helpers")
STEPS_RANGE_ENV = "PROFILECTL_NVTX_STEPS"  # the NVTX range name the rank hook opens over --steps
NOT_INSTALLED = ("Nsight Systems (nsys) not found on PATH", "install Nsight Systems (it comes with the CUDA toolkit "
                 "and NVIDIA's NGC PyTorch image), or add its bin folder (/opt/nvidia/nsight-systems/<version>/bin) "
                 "to PATH")


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/nsys.yaml")


def preset_of(name: str) -> dict[str, Any] | None:
    return (tool_facts()["profile"]["presets"] or {}).get(name)


def torchrun_per_rank(launch: Launch) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(torchrun's argv with --no_python, what each worker then runs before nsys's argv is placed):
    a Python script runs as `<python> script.py`, `-m module` as `<python> -m module`."""
    launcher = launch.launcher_argv
    if not launch.python_ranks:  # --no-python already: the program is what the workers run
        return launcher, launch.program
    python = interpreter(launch) or sys.executable
    own_options = 1 if Path(launcher[0]).name == "torchrun" else 3  # torchrun | python -m torch.distributed.run
    module = [i for i, word in enumerate(launcher) if i >= own_options and word in ("-m", "--module")]
    kept = tuple(word for i, word in enumerate(launcher) if i not in module)
    # --no_python: torch 1.13's torchrun knows only the underscore spelling ("unrecognized arguments:
    # --no-python", seen with Debian's torch 1.13); torch 2.x takes both
    return kept + ("--no_python",), (python, *(("-m",) if module else ()), *launch.program)


class NsightSystems(Backend):
    name = "nsys"
    tool_name = "nsys"
    services = frozenset({"trace"})
    is_profiler = True
    vendor = "nvidia"
    readers = (NsysReader(),)

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, *NOT_INSTALLED, cause="nsys-missing")
        oldest = str(tool_facts()["oldest_supported"])
        if tool.version and version_tuple(tool.version) < version_tuple(oldest):
            return Verdict(False, f"Nsight Systems {tool.version} predates the reports profilectl reads (from {oldest}: "
                           ".nsys-rep, NVTX capture range ends)", f"install Nsight Systems {oldest} or later")
        if preset_of(request.preset) is None:
            return Verdict(False, f"Nsight Systems has no {request.preset} preset")
        what = "CUDA API, kernels, copies and NVTX ranges"
        ranks = f", one report per rank {request.launch.launcher} starts" if request.launch.multi_rank else ""
        return Verdict(True, f"Nsight Systems {tool.version or '(version unknown)'}: {what}{ranks}")

    def traces_gpu(self, facts: Facts) -> bool:
        return True

    def trace_list(self, request: Request) -> list[str]:
        preset = preset_of(request.preset) or {}
        return [str(t) for t in preset.get("trace") or ()]

    def output_name(self, job: Job) -> str:
        """<raw>/<host>-rank<R>-<pid> per rank under a launcher (the reader takes the rank from the
        name); <raw>/<pid>_nsys for one program."""
        launch = job.launch
        if not launch.multi_rank:
            return str(job.raw_dir / "%p_nsys")
        rank = tool_facts()["profile"]["rank_names"][launch.launcher]
        return str(job.raw_dir / f"%h-rank{rank}-%p")

    def bound(self, job: Job) -> list[str]:
        """--range and --steps as an NVTX capture range (captured from the range's start to its end,
        the program runs on); what nsys cannot select is refused."""
        bounds = job.request.bounds
        for option in bounds.kernel_selection:
            raise unsupported("Nsight Systems", option, "it traces every kernel of the captured range; bound the "
                              "trace with --range NAME (an NVTX range) or --steps, or use Nsight Compute (counters)")
        if bounds.steps is not None and bounds.nvtx_range is not None:
            raise unsupported("Nsight Systems", "--steps with --range", "both choose the one capture range; give one")
        if bounds.steps is not None and not job.launch.python_ranks:
            raise unsupported("Nsight Systems", "--steps", "steps are PyTorch training steps and this workload is not "
                              "Python: open an NVTX range around the part to trace and pass --range NAME")
        name = bounds.nvtx_range if bounds.nvtx_range is not None else \
            str(tool_facts()["profile"]["steps_range"]) if bounds.steps is not None else None
        if name is None:
            return []
        return ["--capture-range=nvtx", f"--nvtx-capture={name}", "--capture-range-end=stop"]

    def steps(self, job: Job) -> tuple[Step, ...]:
        if job.request.attach is not None:
            raise unsupported("Nsight Systems", "--attach", "it traces processes it starts")
        tool = self.require_tool(job.facts)
        preset = preset_of(job.request.preset) or {}
        argv = [tool.path, "profile", f"--trace={','.join(self.trace_list(job.request))}",
                *(str(o) for o in preset.get("options") or ()), "--force-overwrite=true",
                f"--output={self.output_name(job)}", *self.bound(job), *job.request.bounds.profiler_args]
        launch = job.launch
        if launch.launcher == "torchrun":
            launcher, program = torchrun_per_rank(launch)
            command = launcher + tuple(argv) + program
        elif launch.multi_rank:
            command = launch.launcher_argv + tuple(argv) + launch.program  # inside: before each rank's program
        else:
            command = tuple(argv) + launch.program
        export = (sys.executable, "-I", "-S", str(HELPERS / "nsys_export.py"), str(job.raw_dir), "--", tool.path,
                  *tool_facts()["export"]["argv"])
        return (Step(argv=command, label=self.name), Step(argv=export, label="nsys export"))

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        bounds = job.request.bounds
        if bounds.steps is not None or bounds.nvtx_range is not None:
            env.update(tool_facts()["profile"]["nvtx_capture_env"])
        if bounds.steps is not None:
            env.update(rank_hook_env(job, step_action="nvtx"))
            env[STEPS_RANGE_ENV] = str(tool_facts()["profile"]["steps_range"])
        return env

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        launch = request.launch
        notes.append(f"nsys traces {','.join(self.trace_list(request))} (preset {request.preset}); the SQLite export "
                     "of each report is made after the run (nsys export --type sqlite) and read")
        if launch.multi_rank:
            rank = tool_facts()["profile"]["rank_names"][launch.launcher]
            how = ("torchrun starts nsys in each worker (--no_python, the workers' Python named)"
                   if launch.launcher == "torchrun" else f"{launch.launcher} starts nsys before each rank's program")
            notes.append(f"one report per rank: {how}, named <host>-rank{rank}-<pid>.nsys-rep (nsys expands %q{{}} in "
                         "each rank)")
        bounds = request.bounds
        if bounds.nvtx_range is not None:
            notes.append(f"--range {bounds.nvtx_range}: nsys captures from the first NVTX range of that name to its end in "
                         "each process (--capture-range=nvtx, --capture-range-end=stop; unregistered names match)")
        if bounds.steps is not None:
            notes.append(f"--steps {bounds.steps[0]}:{bounds.steps[1]}: profilectl's rank hook opens the NVTX range "
                         f"{tool_facts()['profile']['steps_range']} over those steps and nsys captures it")
        return notes

    def read(self, raw_dir: Path) -> Tables:
        try:
            return super().read(raw_dir)
        except ProfilectlError as exc:  # nsys missing when a report must be exported: the run keeps its reports
            if isinstance(exc, FormatError):
                raise
            raise FormatError(str(exc)) from None

