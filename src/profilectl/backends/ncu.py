"""Nsight Compute (ncu) for hardware counters on NVIDIA GPUs.

`ncu --metrics a,b --csv` works as root in a container with SYS_ADMIN; without permission it fails
with ERR_NVGPUCTRPERM. --target-processes all follows child processes (python launchers, MPI).
"""

from __future__ import annotations

from typing import Callable

from profilectl.backends.base import Backend, Job, Step, rank_hook_env, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.formats import ncu as reader
from profilectl.formats.counter_listing import CounterListing
from profilectl.privilege import WORKLOAD, Need
from profilectl.probe.machine import CommandResult
from profilectl.request import Request

OUTPUT = "ncu_metrics.csv"
COLLECTIVE_KERNELS = "nccl"  # ncclDevKernel_*, ncclKernel_*: replaying one waits for the other ranks (a hang)


class NsightCompute(Backend):
    name = "ncu"
    tool_name = "ncu"
    services = frozenset({"counters"})
    is_profiler = True
    vendor = "nvidia"
    readers = (reader.NcuCsvReader(),)

    def capabilities(self, facts: Facts, request: Request) -> tuple[Need, ...]:
        """The NVIDIA driver's RmProfilingAdminOnly=1 (its default) lets only CAP_SYS_ADMIN read GPU
        counters, and Nsight Compute reads them in the profiled process (its injection library)."""
        if not facts.host.nvidia_profiling_admin_only:
            return ()
        return (Need("SYS_ADMIN", WORKLOAD, "the NVIDIA driver lets only admins read GPU performance counters "
                     "(RmProfilingAdminOnly=1) and Nsight Compute reads them inside the workload's process",
                     "let every user read them: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
                     "/etc/modprobe.d, then reload the driver"),)

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "ncu (Nsight Compute) not found",
                           "install Nsight Compute, or add /opt/nvidia/nsight-compute/<version> to PATH")
        if (refusal := self.counter_gate(facts)):
            return refusal
        return Verdict(True, f"Nsight Compute {tool.version or ''}".strip())

    def steps(self, job: Job) -> tuple[Step, ...]:
        launch = job.launch
        if launch.launcher == "srun":
            raise unsupported(self.name, "a job started by srun", "srun's tasks are started by slurmd, not as "
                              "children ncu could follow: run profilectl itself as the task (srun … profilectl "
                              "counters -- python3 train.py), one run per rank")
        metrics = ",".join(job.counters.counters if job.counters else ())
        argv = [self.require_tool(job.facts).path, "--target-processes", "all", "--clock-control",
                job.request.clock_control, "--metrics", metrics, "--csv", "--log-file", str(job.raw_dir / OUTPUT),
                *self.bound(job), *job.request.bounds.profiler_args]
        # Always around the launcher: ncu follows every child process (torchrun's workers, mpirun's
        # local ranks) into one log with a Process ID column; its --log-file expands no placeholders
        # (checked on Nsight Compute 2025.3), so one ncu per rank would write over one file.
        return (Step(argv=tuple(argv) + launch.argv, label=self.name),)

    def bound(self, job: Job) -> list[str]:
        """The bounded-profiling request as ncu options: -k regex: for kernel names (collectives
        left out unless --include-collectives), --launch-skip/--launch-count over every matched
        launch together, --steps through cudaProfilerStart/Stop (--profile-from-start off), --range
        through NVTX."""
        request, bounds = job.request, job.request.bounds
        argv: list[str] = []
        exclude = [bounds.exclude_kernel] if bounds.exclude_kernel else []
        if not request.include_collectives:
            exclude.append(COLLECTIVE_KERNELS)
        guard = f"^(?!.*(?:{'|'.join(exclude)}))" if exclude else ""
        if bounds.kernel is not None:
            argv += ["--kernel-name", f"regex:{guard}.*(?:{bounds.kernel})"]
        elif guard:
            argv += ["--kernel-name", f"regex:{guard}"]
        if bounds.launch_skip is not None:
            argv += ["--launch-skip", str(bounds.launch_skip)]
        if bounds.launch_count is not None:
            argv += ["--launch-count", str(bounds.launch_count)]
        if bounds.steps is not None:
            if not job.launch.python_ranks:
                raise unsupported(self.name, "--steps", "steps are PyTorch training steps; this workload is not Python")
            argv += ["--profile-from-start", "off"]
        if bounds.nvtx_range is not None:
            argv += ["--nvtx", "--nvtx-include", f"{bounds.nvtx_range}/"]
        return argv

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        if job.request.bounds.steps is not None:
            env.update(rank_hook_env(job, step_action="cuda-profiler"))
        return env

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        if not request.include_collectives:
            notes.append("NCCL kernels are left out of the replay (--include-collectives to keep them): replaying a "
                         "collective waits for ranks that are not replaying and hangs the job")
        if request.bounds.launch_window:
            notes.append("--launch-skip/--launch-count count the launches of every matched kernel together in ncu")
        if request.clock_control == "base":
            notes.append("ncu locks the GPU clocks to base while it replays each kernel (--clock-control base, ncu's "
                         "default: repeatable counter values): kernel durations of this run are longer than in a trace "
                         "(28-36 % on an H200); --clock-control none measures at the GPU's own clocks")
        else:
            notes.append("--clock-control none: clocks left to the GPU (boost, thermal state): durations closer to a "
                         "trace, counter values vary more between runs")
        return notes

    def kernel_timing(self, request: Request) -> str:
        clocks = "clocks locked to base" if request.clock_control == "base" else "clocks not controlled"
        return f"Nsight Compute kernel replay ({clocks})"

    def list_counters(self, facts: Facts, run: Callable[[list[str]], CommandResult]) -> CounterListing:
        result = run([self.require_tool(facts).path, "--query-metrics"])
        names = reader.available_metrics(result.output) if result.ok else set()
        if names:
            return CounterListing("ncu --query-metrics", frozenset(names), "ncu --query-metrics")
        return CounterListing("ncu --query-metrics", ran=result.ok,
                              first_line=result.output.strip().splitlines()[0] if result.ok and result.output.strip() else "")

    def counter_key(self, name: str) -> str:
        return reader.metric_base(name)  # --query-metrics lists bases; .sum/.avg/.pct roll up
