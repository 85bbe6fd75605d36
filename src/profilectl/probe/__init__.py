"""probe: the machine -> Facts (what it is; what a service would pick is plan.assess's job)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

from profilectl.errors import UsageError
from profilectl.facts import Facts, Verdict
from profilectl.probe import sources
from profilectl.probe.machine import Machine, in_background


def _nvidia_counter_check(facts: Facts) -> Verdict:
    from profilectl.probe.diagnose import NVIDIA_PERMISSION
    host = facts.host
    if host.nvidia_profiling_admin_only and host.uid != 0 and "SYS_ADMIN" not in host.effective_capabilities:
        return Verdict(False, "the NVIDIA driver restricts GPU performance counters to admin users "
                       "(RmProfilingAdminOnly=1) and this process is neither root nor CAP_SYS_ADMIN; "
                       "ncu would fail with ERR_NVGPUCTRPERM", NVIDIA_PERMISSION.fix, cause=NVIDIA_PERMISSION.cause)
    return Verdict(True, "counter access allowed (root, CAP_SYS_ADMIN or unrestricted driver)")


def torch_runtime_check(facts: Facts) -> Verdict | None:
    """A PyTorch wheel that bundles another ROCm release's runtime than the system profiler's: two
    HIP/HSA runtimes in one process, a common cause of aborts and missing events."""
    torch, rocm = facts.torch, facts.rocm
    if not (torch.hip and rocm.version and facts.first_gpu("amd")):
        return None
    # torch.version.hip is `hipconfig --version` of the build: MAJOR.MINOR is the ROCm release
    # (6.2.41133-dd7f95766 -> 6.2); the third number is a build number, not the patch level.
    bundled, system = sources.version_tuple(torch.hip)[:2], sources.version_tuple(rocm.version)[:2]
    if not bundled or bundled == system:
        return Verdict(True, f"PyTorch {torch.version} is built for ROCm {'.'.join(map(str, bundled)) or '?'}, "
                       f"the system's release")
    wanted = ".".join(map(str, system))
    built = ".".join(map(str, bundled))
    return Verdict(False, f"PyTorch {torch.version} bundles the HIP runtime of ROCm {built} (torch.version.hip "
                   f"{torch.hip}) while the system's profilers are ROCm {rocm.version}: two runtimes in one process "
                   "make the profiler abort ('aqlprofile API table load failed') or miss events",
                   f"install PyTorch built for ROCm {wanted} (pip install torch --index-url "
                   f"https://download.pytorch.org/whl/rocm{wanted}), or profile with ROCm {built}'s rocprofv3",
                   cause="two-rocm-runtimes")


def probe(root: Path | str = "/", path: str | None = None, deep: bool = False,
          env: Mapping[str, str] | None = None, remember: bool = False) -> Facts:
    """remember: answers of unchanged files may come from the cache (env-check; probe/facts_cache.py)."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"root path {root} does not exist or is not a directory")
    started = time.monotonic()
    machine = Machine(root=root, remember=remember) if path is None else Machine(root=root, path=path,
                                                                                   remember=remember)
    if env is not None:
        machine.env = env
    # The slow sources are other programs (nvidia-smi or rocminfo, the workload's Python for torch):
    # run them side by side while the files are read here.
    gpus = in_background(sources.gpus, machine)
    torch = in_background(sources.torch, machine)
    rocm = sources.rocm(machine)
    base = Facts(host=sources.host(machine), gpus=gpus(), rocm=rocm,
                 tools=sources.tools(machine, rocm.root), torch=torch())
    checks: dict[str, Verdict] = {}
    notes: list[str] = []
    # the AMD, ptrace and live checks imported where they apply (env-check starts faster without)
    if base.first_gpu("amd"):
        from profilectl.probe import counters
        checks["amd_devices"] = counters.amd_device_access(base)
        checks["amd_counters"] = counters.amd_counter_support(base, machine)
    if base.first_gpu("nvidia"):
        checks["nvidia_counters"] = _nvidia_counter_check(base)
    if base.first_gpu("amd"):  # may rocprofv3 --attach ptrace a process of this user here?
        from profilectl.probe import attach
        checks["attach_ptrace"] = attach.permission(base, attach.ptrace_scope(machine))
    runtime = torch_runtime_check(base)
    if runtime is not None:
        checks["torch_runtime"] = runtime
        if not runtime.available:
            notes.append(f"{runtime.reason}. Fix: {runtime.fix}")
    if deep:
        from profilectl.probe import live
        verdict = live.probe_counters(base, machine)
        if verdict is not None:
            checks["live_counters"] = verdict
        else:
            notes.append("--deep: no live counter probe possible here (needs a GPU, its profiler and PyTorch)")
    import dataclasses
    return dataclasses.replace(base, checks=checks, notes=tuple(notes),
                               probe_seconds=round(time.monotonic() - started, 3))
