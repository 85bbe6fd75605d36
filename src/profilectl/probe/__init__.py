"""probe: facts about this machine -> an EnvReport (also written as env.json in every run)."""

from __future__ import annotations

import time
from pathlib import Path

from profilectl.errors import UsageError
from profilectl.probe import counters, facts, live
from profilectl.probe.diagnose import NVIDIA_PERMISSION
from profilectl.probe.machine import Machine
from profilectl.probe.report import EnvReport, Verdict


def _nvidia_counter_check(report: EnvReport) -> Verdict:
    if report.host.nvidia_profiling_admin_only and report.host.uid != 0 \
            and "SYS_ADMIN" not in report.host.effective_capabilities:
        return Verdict(False, "the NVIDIA driver restricts GPU performance counters to admin users "
                       "(RmProfilingAdminOnly=1) and this process is neither root nor CAP_SYS_ADMIN; "
                       "ncu would fail with ERR_NVGPUCTRPERM", NVIDIA_PERMISSION.fix, cause=NVIDIA_PERMISSION.cause)
    return Verdict(True, "counter access allowed (root, CAP_SYS_ADMIN or unrestricted driver)")


def probe(root: Path | str = "/", path: str | None = None, deep: bool = False,
          env: dict[str, str] | None = None) -> EnvReport:
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"root path {root} does not exist or is not a directory")
    started = time.monotonic()
    machine = Machine(root=root) if path is None else Machine(root=root, path=path)
    if env is not None:
        machine.env = env
    rocm = facts.rocm(machine)
    report = EnvReport(host=facts.host(machine), gpus=facts.gpus(machine), rocm=rocm,
                       tools=facts.tools(machine, rocm.root), torch=facts.torch(machine), capabilities={})
    if report.first_gpu("amd"):
        report.checks["amd_devices"] = counters.amd_device_access(report)
        report.checks["amd_counters"] = counters.amd_counter_support(report, machine)
    if report.first_gpu("nvidia"):
        report.checks["nvidia_counters"] = _nvidia_counter_check(report)
    if deep:
        verdict = live.probe_counters(report, machine)
        if verdict is not None:
            report.checks["live_counters"] = verdict
        else:
            report.notes.append("--deep: no live counter probe possible here (needs a GPU, its profiler and PyTorch)")
    from profilectl.plan import assess  # plan imports the backends, which read EnvReport
    assess(report)
    report.probe_seconds = round(time.monotonic() - started, 3)
    return report
