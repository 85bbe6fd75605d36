"""probe: the machine -> Facts (what it is; what a service would pick is plan.assess's job)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

from profilectl.errors import UsageError
from profilectl.facts import Facts, Verdict
from profilectl.probe import counters, live, sources
from profilectl.probe.diagnose import NVIDIA_PERMISSION
from profilectl.probe.machine import Machine


def _nvidia_counter_check(facts: Facts) -> Verdict:
    host = facts.host
    if host.nvidia_profiling_admin_only and host.uid != 0 and "SYS_ADMIN" not in host.effective_capabilities:
        return Verdict(False, "the NVIDIA driver restricts GPU performance counters to admin users "
                       "(RmProfilingAdminOnly=1) and this process is neither root nor CAP_SYS_ADMIN; "
                       "ncu would fail with ERR_NVGPUCTRPERM", NVIDIA_PERMISSION.fix, cause=NVIDIA_PERMISSION.cause)
    return Verdict(True, "counter access allowed (root, CAP_SYS_ADMIN or unrestricted driver)")


def probe(root: Path | str = "/", path: str | None = None, deep: bool = False,
          env: Mapping[str, str] | None = None) -> Facts:
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"root path {root} does not exist or is not a directory")
    started = time.monotonic()
    machine = Machine(root=root) if path is None else Machine(root=root, path=path)
    if env is not None:
        machine.env = env
    rocm = sources.rocm(machine)
    base = Facts(host=sources.host(machine), gpus=sources.gpus(machine), rocm=rocm,
                 tools=sources.tools(machine, rocm.root), torch=sources.torch(machine))
    checks: dict[str, Verdict] = {}
    notes: list[str] = []
    if base.first_gpu("amd"):
        checks["amd_devices"] = counters.amd_device_access(base)
        checks["amd_counters"] = counters.amd_counter_support(base, machine)
    if base.first_gpu("nvidia"):
        checks["nvidia_counters"] = _nvidia_counter_check(base)
    if deep:
        verdict = live.probe_counters(base, machine)
        if verdict is not None:
            checks["live_counters"] = verdict
        else:
            notes.append("--deep: no live counter probe possible here (needs a GPU, its profiler and PyTorch)")
    import dataclasses
    return dataclasses.replace(base, checks=checks, notes=tuple(notes),
                               probe_seconds=round(time.monotonic() - started, 3))
