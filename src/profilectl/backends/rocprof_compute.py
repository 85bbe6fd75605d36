"""rocprof-compute (rocprofiler-compute, formerly Omniperf) for hardware counters on AMD Instinct GPUs.

Two commands, argv lists from profiling/tools/rocprof-compute.yaml (each release's own argument
parser, read): `rocprof-compute profile -n NAME -p RAW/workload [-k KERNEL] -- APP ARGS` collects
the counters of every panel of its analysis (the application runs once per counter pass, about a
dozen) and, unless it cannot, measures this GPU's empirical roofline (roofline.csv); then
`rocprof-compute analyze -p RAW/workload -b 2 3 --save-dfs RAW/analyze -o RAW/analyze.txt` writes its
speed-of-light and memory-chart tables. formats/rocprof_compute.py reads both.

Its place in the counters order: after rocprofv3. rocprofv3 collects exactly the set asked for in as
few passes as its blocks allow; rocprof-compute runs the application for every panel it knows, so it
is the choice where rocprofv3 cannot run (or with --backend rocprof-compute, for its own analysis);
it stays ahead of legacy rocprof, since it adds the speed-of-light and the measured roofline.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from profilectl.backends.base import Backend, Job, Step, amd_counter_needs, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.formats.rocprof_compute import RocprofComputeReader, tool_facts
from profilectl.privilege import Need
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

WORKLOAD_DIR = "workload"  # profile --path: pmc_perf.csv, sysinfo.csv, roofline.csv ...
TABLES_DIR = "analyze"  # analyze --save-dfs: the speed-of-light and memory-chart tables
REPORT_FILE = "analyze.txt"  # analyze -o: the text report as rocprof-compute prints it


@functools.lru_cache(maxsize=None)
def _facts() -> dict[str, Any]:
    return tool_facts()


def version_of(facts: Facts) -> tuple[int, ...]:
    """The installed rocprof-compute's version (its --version), else the newest the table knows."""
    tool = facts.tool("rocprof-compute")
    found = version_tuple(tool.version if tool else None)
    return found or version_tuple(str(_facts()["newest_known"]))


def accepts(command: str, option: str, version: tuple[int, ...]) -> bool:
    """Does this release's `command` parser take `option` (profiling/tools/rocprof-compute.yaml)?"""
    entry = (_facts()[command]["options"] or {}).get(option)
    if entry is None:
        return False
    since = entry.get("since")
    return since is None or version >= version_tuple(str(since))


def architectures(version: tuple[int, ...]) -> list[str]:
    """The GPUs this release has analysis configs for (empty where the table has no entry)."""
    for entry in reversed(_facts()["architectures"]):
        low, high = version_tuple(str(entry["since"])), version_tuple(str(entry.get("until") or ""))
        if version >= low and (not high or version <= high):
            return list(entry["archs"])
    return list(_facts()["architectures"][-1]["archs"]) if version > version_tuple(str(_facts()["newest_known"])) else []


def workload_name(job: Job) -> str:
    """profile -n: the run directory's own name (unique; rocprof-compute refuses '/' in it)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", job.raw_dir.parent.name) or "profilectl"
    return name


class RocprofCompute(Backend):
    name = "rocprof-compute"
    tool_name = "rocprof-compute"
    services = frozenset({"counters"})
    is_profiler = True
    vendor = "amd"
    readers = (RocprofComputeReader(),)

    def capabilities(self, facts: Facts, request: Request) -> tuple[Need, ...]:
        return amd_counter_needs(facts, request, "rocprof-compute")

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request) or self.gpu_gate(facts)):
            return refusal
        tool = self.tool(facts)
        if tool is None:
            return Verdict(False, "rocprof-compute (rocprofiler-compute) not found",
                           "install rocprofiler-compute (ROCm 6.3 and later), or add /opt/rocm/bin to PATH")
        if request.attach is not None:
            return Verdict(False, "rocprof-compute profiles a program it starts; it cannot attach", cause="attach-service")
        if (refusal := self.counter_gate(facts)):
            return refusal
        version = version_of(facts)
        gpu = facts.first_gpu("amd")
        known = architectures(version)
        if gpu is not None and gpu.arch and known and gpu.arch not in known:
            return Verdict(False, f"rocprof-compute {tool.version or ''} has no analysis for {gpu.arch} "
                           f"(Instinct only: {', '.join(known)})".replace("  ", " "),
                           "use rocprofv3 for this GPU's counters", cause="arch-unsupported")
        return Verdict(True, f"rocprof-compute {tool.version or '(version unknown)'}: its speed-of-light, memory chart "
                             "and empirical roofline (the application runs once per counter pass)")

    def steps(self, job: Job) -> tuple[Step, ...]:
        tool = self.require_tool(job.facts)
        request, bounds, launch = job.request, job.request.bounds, job.launch
        refused = [*(o for o in bounds.kernel_selection if o != "--kernel"),
                   *(option for option, value in (("--steps", bounds.steps), ("--range", bounds.nvtx_range))
                     if value is not None)]
        if refused:
            raise unsupported(self.name, refused[0], "it filters kernels by name only (--kernel); use rocprofv3 for "
                              "launch windows, steps and ranges")
        if request.ranks or launch.multi_rank:
            raise unsupported(self.name, f"a job started by {launch.launcher}" if launch.multi_rank else "--ranks",
                              "it profiles one process, which it starts once per counter pass; profile one rank's "
                              "command, or use rocprofv3 for a multi-rank job")
        version = version_of(job.facts)
        workload = job.raw_dir / WORKLOAD_DIR
        profile = [tool.path, "profile", "--name", workload_name(job), "--path", str(workload)]
        if bounds.kernel is not None:
            profile += ["--kernel", bounds.kernel]
        if accepts("profile", "--format-rocprof-output", version):
            profile += ["--format-rocprof-output", "csv"]  # the default, pinned: 3.3.0 warns it will become rocpd
        profile += [*bounds.profiler_args, "--", *launch.argv]
        analyze = [tool.path, "analyze", "--path", str(workload), "--block", *_facts()["analyze"]["panels"],
                   "--normal-unit", "per_kernel", "--save-dfs", str(job.raw_dir / TABLES_DIR),
                   "--output", str(job.raw_dir / REPORT_FILE)]
        return (Step(argv=tuple(profile), label=f"{self.name} profile"),
                Step(argv=tuple(analyze), label=f"{self.name} analyze"))

    def counter_passes(self, counter_set: Any) -> tuple[tuple[str, ...], ...]:
        return (counter_set.counters,)  # rocprof-compute decides its own passes

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        notes.append("rocprof-compute collects the counters of all its panels, not only the set's: the application "
                     "runs once per counter pass; the set's derived metrics are computed from its pmc_perf.csv where "
                     "their counters are in it")
        if request.bounds.kernel is not None:
            notes.append("--kernel is passed to rocprof-compute profile --kernel (rocprofv3's --kernel-include-regex "
                         "from 3.2; a kernel-name filter before)")
        return notes
