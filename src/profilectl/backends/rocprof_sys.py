"""rocprof-sys (rocprofiler-systems, formerly Omnitrace) for traces on AMD GPUs with the host's
call stacks sampled beside the GPU's kernels and copies and the HIP API.

`rocprof-sys-run --output RAW/rocprof-sys --trace --sample --include rocm -- APP ARGS`, with
ROCPROFSYS_USE_ROCPD=true (profiling/tools/rocprof-sys.yaml: options and sources per release): its
rocpd database is read by the rocpd reader (formats/rocpd.py), which turns the sampled frames into
the timeline's host activity, so an idle gap is named by the host function that held it.

Its place in the trace order: after rocprofv3 and before legacy rocprof. rocprofv3 traces the GPU
and the HIP API at a lower cost; rocprof-sys adds what the host was doing between the calls
(sampling every thread), the answer to "host work" gaps of a native program. It needs 1.2.0 or
later (the first with rocpd output; earlier releases write Perfetto protobuf only).
"""

from __future__ import annotations

import functools
from typing import Any

from profilectl import data
from profilectl.backends.base import Backend, Job, Step, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.formats.rocpd import RocpdReader
from profilectl.formats.rocprof_sys import RocprofSysPerfettoReader
from profilectl.launchers.base import INSIDE
from profilectl.probe.machine import CommandResult, Machine
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

OUTPUT_DIR = "rocprof-sys"
VERSION_TIMEOUT_S = 30.0


@functools.lru_cache(maxsize=None)
def tool_facts() -> dict[str, Any]:
    return data.load_mapping("tools/rocprof-sys.yaml")


def _run(argv: list[str]) -> CommandResult:
    return Machine().run(argv, timeout_s=VERSION_TIMEOUT_S)


@functools.lru_cache(maxsize=None)
def _version_of(path: str) -> tuple[int, ...]:
    """What `rocprof-sys-run --version` prints ("rocprof-sys-run v1.2.0 (rev: ...)"), as numbers."""
    import re
    result = _run([path, "--version"])
    found = re.search(r"(\d+\.\d+\.\d+)", result.output) if result.ok else None
    return version_tuple(found.group(1)) if found else ()


def version_of(facts: Facts) -> tuple[int, ...]:
    tool = facts.tool("rocprof-sys-run")
    if tool is None:
        return ()
    return version_tuple(tool.version) or _version_of(tool.path)


class RocprofSys(Backend):
    name = "rocprof-sys"
    tool_name = "rocprof-sys-run"
    services = frozenset({"trace"})
    is_profiler = True
    vendor = "amd"
    readers = (RocpdReader(), RocprofSysPerfettoReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "rocprof-sys-run (rocprofiler-systems) not found",
                           "install rocprofiler-systems (ROCm 6.3 and later), or add /opt/rocm/bin to PATH")
        if request.attach is not None:
            return Verdict(False, "profilectl attaches with rocprofv3 only", cause="attach-service")
        version, since = version_of(facts), version_tuple(str(tool_facts()["rocpd_since"]))
        shown = ".".join(map(str, version)) or "of unknown version"
        if version < since:
            return Verdict(False, f"rocprof-sys {shown} writes its trace as Perfetto protobuf only; profilectl reads "
                           f"the rocpd database of {tool_facts()['rocpd_since']} and later",
                           "use rocprofv3 for this trace, or rocprofiler-systems 1.2.0 or later",
                           cause="rocprof-sys-release")
        return Verdict(True, f"rocprof-sys {shown}: GPU activity and the HIP API with the host's call stacks "
                             "sampled (what the host did while the GPU waited)")

    def environment(self, job: Job) -> dict[str, str]:
        env = super().environment(job)
        env.update({k: str(v) for k, v in (tool_facts()["run"]["environment"] or {}).items()})
        return env

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        request, bounds, launch = job.request, job.request.bounds, job.launch
        refused = [*bounds.kernel_selection, *(option for option, value in
                                               (("--steps", bounds.steps), ("--range", bounds.nvtx_range),
                                                ("--ranks", request.ranks or None)) if value is not None)]
        if refused:
            raise unsupported(self.name, refused[0], "it traces every kernel of the whole run; use rocprofv3 for "
                              "kernel filters, steps, ranges and rank selection")
        if request.preset not in ("lightweight", "sys"):
            raise unsupported(self.name, f"--preset {request.preset}", "its trace is one set (GPU activity, HIP API, "
                              "sampled host call stacks): use the lightweight or sys preset, or rocprofv3")
        if launch.multi_rank and launch.placement != INSIDE:
            raise unsupported(self.name, f"a job started by {launch.launcher}", "it runs inside each rank "
                              "(mpirun ... rocprof-sys-run -- app): use mpirun or srun, or rocprofv3")
        argv = [tool.path, "--output", str(job.raw_dir / OUTPUT_DIR), "--trace", "--sample", "--include", "rocm",
                *bounds.profiler_args, "--"]
        return (Step(argv=job.launch.wrap(argv), label=self.name),)

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        notes.append("rocprof-sys writes a rocpd database (ROCPROFSYS_USE_ROCPD=true), read like rocprofv3's: its "
                     "sampled call stacks become the timeline's host activity, named by each sample's innermost "
                     "frame outside the system's and ROCm's libraries; its Perfetto trace is kept for the UI")
        return notes
