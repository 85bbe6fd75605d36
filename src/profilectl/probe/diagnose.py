"""Recognising why a profiler failed, from what it printed and how it ended.

Used twice with the same words: by the live probe (`env-check --deep`) and after a real run, so a
user sees the same cause and fix in env-check and in a failed run's manifest.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolFailure:
    """A recognised cause of a profiler's failure: its machine-readable name, the reason in words and the fix."""
    cause: str
    reason: str
    fix: str


AQLPROFILE_LOAD = ToolFailure(
    "aqlprofile-load-failed",
    "the profiler aborted with 'aqlprofile API table load failed': the HSA runtime in the process could "
    "not load libhsa-amd-aqlprofile64.so (only its versioned name in the loader path, or a workload that "
    "brings its own HIP/HSA runtime, such as a PyTorch wheel built for another ROCm release)",
    "run `profilectl env-check --deep` for the precise cause; tracing and timing still work "
    "(`profile`, `trace`)")
AGENT_ITERATION = ToolFailure(
    "hsa-agent-iteration-failed",
    "the profiler aborted with 'Error Calling hsa_iterate_agents': aqlprofile met an agent it does not "
    "handle (the NPU of Strix/Strix Halo APUs, gfx115x, before the fix backported to ROCm 7.2.1; "
    "rocm-systems issue #2169)",
    "use ROCm 7.2.1 or later for counters on gfx115x; tracing and timing still work (`profile`, `trace`)")
PERFMON = ToolFailure(
    "missing-perfmon",
    "the GPU could not be locked for profiling: the process lacks CAP_PERFMON / CAP_SYS_ADMIN",
    "run the counters service (it runs as root with cap_add SYS_ADMIN), or run as root")
NVIDIA_PERMISSION = ToolFailure(
    "nvidia-counter-permission",
    "ncu was refused access to the GPU performance counters (ERR_NVGPUCTRPERM)",
    "run as root / with CAP_SYS_ADMIN (the counters service does), or set "
    "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` on the host and reload the driver")
ABORTED = ToolFailure(
    "profiler-aborted",
    "the profiler aborted (SIGABRT) without a recognised message",
    "see stderr.log in the run directory; `profilectl env-check --deep` tests counters live")

_PATTERNS = [
    (re.compile(r"Error Calling hsa_iterate_agents", re.I), AGENT_ITERATION),
    (re.compile(r"aqlprofile API table load failed", re.I), AQLPROFILE_LOAD),
    (re.compile(r"could not be locked for profiling.*(SYS_PERFMON|PERFMON)", re.I | re.S), PERFMON),
    (re.compile(r"ERR_NVGPUCTRPERM"), NVIDIA_PERMISSION),
]


def diagnose(output: str, returncode: int | None) -> ToolFailure | None:
    """The recognised cause of a profiler failure, or None when the output shows none."""
    for pattern, diagnosis in _PATTERNS:
        if pattern.search(output):
            return diagnosis
    if returncode in (-signal.SIGABRT, 128 + signal.SIGABRT):
        return ABORTED
    return None
