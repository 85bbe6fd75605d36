"""Can this process attach a profiler to a running process? (rocprofv3 --attach, ROCm 7.1+)

Read from the machine, never guessed: Yama's /proc/sys/kernel/yama/ptrace_scope, this process's
CapEff (CAP_SYS_PTRACE) and uid (Facts.host), and for a given target /proc/PID/status (its uid),
/proc/PID/environ (ROCP_TOOL_ATTACH on, as the ROCm runtime reads it: attach_enabled) and
/proc/PID/cmdline (recorded in the manifest).
The rules (Linux Documentation/admin-guide/LSM/Yama.rst and ptrace(2) "Ptrace access mode
checking"): scope 0, the same uid or CAP_SYS_PTRACE; scope 1, only a descendant of the tracer
unless CAP_SYS_PTRACE (rocprofv3 is never the target's parent); scope 2, CAP_SYS_PTRACE only;
scope 3, no process may attach until reboot. Another uid always needs CAP_SYS_PTRACE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from profilectl.facts import Facts, Verdict
from profilectl.probe.machine import Machine

if TYPE_CHECKING:
    from profilectl.request import Attach

TARGET_ENV = "ROCP_TOOL_ATTACH"
YAMA_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"
GRANT_FIX = ("grant CAP_SYS_PTRACE: run as root with `--cap-add SYS_PTRACE` (docker run) or `cap_add: [SYS_PTRACE]` "
             "(compose; the trace service has it)")


@dataclass(frozen=True)
class Target:
    """A process to attach to, as /proc shows it (None: that file could not be read)."""
    pid: int
    exists: bool
    uid: int | None = None
    cmdline: tuple[str, ...] = ()
    environ: dict[str, str] | None = None  # None: unreadable (another user's process without CAP_SYS_PTRACE)


def attach_enabled(value: str | None) -> bool:
    """Does the ROCm runtime inside the target accept an attaching profiler with this
    ROCP_TOOL_ATTACH value? rocprofiler-register reads it as a boolean (profiling/tools/
    rocprofv3.yaml `attach`): digits are a number, on when non-zero (1, 2); other text, lower-cased,
    is off only when it is one of the runtime's off words; empty is an error there; unset is off."""
    if value is None or value == "":
        return False
    if value.isdigit():
        return int(value) != 0
    from profilectl import data  # the runtime's words, as data
    return value.lower() not in data.load_mapping("tools/rocprofv3.yaml")["attach"]["target_env_off"]


def ptrace_scope(machine: Machine) -> int | None:
    text = (machine.read(YAMA_SCOPE) or "").strip()
    return int(text) if text.isdigit() else None


def read_target(machine: Machine, pid: int) -> Target:
    status = machine.read(f"/proc/{pid}/status")
    if status is None:
        return Target(pid, exists=False)
    uid = None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            uid = int(fields[2]) if len(fields) > 2 else None  # the effective uid
    try:
        raw_cmdline = machine.file(f"/proc/{pid}/cmdline").read_bytes()
        cmdline = tuple(p.decode(errors="replace") for p in raw_cmdline.split(b"\0") if p)
    except OSError:
        cmdline = ()
    environ: dict[str, str] | None
    try:
        raw_env = machine.file(f"/proc/{pid}/environ").read_bytes()
        environ = dict(item.decode(errors="replace").partition("=")[::2] for item in raw_env.split(b"\0") if item)
    except OSError:
        environ = None
    return Target(pid, exists=True, uid=uid, cmdline=cmdline, environ=environ)


def permission(facts: Facts, scope: int | None, target_uid: int | None = None) -> Verdict:
    """May this process ptrace another one (rocprofv3 is not the target's parent)?"""
    has_cap = "SYS_PTRACE" in facts.host.effective_capabilities
    if scope == 3:
        return Verdict(False, "Yama ptrace_scope is 3: the kernel forbids attaching to any process until reboot",
                       "boot with kernel.yama.ptrace_scope=0 (sysctl.conf: kernel.yama.ptrace_scope = 0), "
                       "or start the workload under profilectl instead of attaching", cause="ptrace-scope-3")
    if target_uid is not None and target_uid != facts.host.uid and not has_cap:
        return Verdict(False, f"the target runs as uid {target_uid}, this process as uid {facts.host.uid}, "
                       "without CAP_SYS_PTRACE", f"run profilectl as uid {target_uid}, or {GRANT_FIX}",
                       cause="ptrace-other-user")
    if scope in (1, 2) and not has_cap:
        what = "only to descendants" if scope == 1 else "only with CAP_SYS_PTRACE"
        return Verdict(False, f"Yama ptrace_scope is {scope} (attach {what}) and this process lacks CAP_SYS_PTRACE",
                       f"{GRANT_FIX}, or `sudo sysctl kernel.yama.ptrace_scope=0` on the host",
                       cause="no-ptrace-capability")
    how = "CAP_SYS_PTRACE" if has_cap else "same user, Yama scope 0" if scope == 0 else "same user, no Yama"
    return Verdict(True, f"ptrace allowed ({how})")


def target_verdict(target: Target) -> Verdict:
    """Was the target started so that rocprofv3 can attach (ROCP_TOOL_ATTACH=1 in its environment)?"""
    if not target.exists:
        return Verdict(False, f"no process {target.pid}", "give the PID of a running process", cause="no-target")
    if target.environ is None:
        return Verdict(False, f"cannot read /proc/{target.pid}/environ to check {TARGET_ENV}",
                       f"run profilectl as the target's user, or {GRANT_FIX}", cause="target-unreadable")
    value = target.environ.get(TARGET_ENV)
    if not attach_enabled(value):
        command = " ".join(target.cmdline[:3]) or f"process {target.pid}"
        how = f"was not started with {TARGET_ENV}=1" if value is None else \
            f"was started with {TARGET_ENV}={value!r}, which the ROCm runtime reads as off"
        return Verdict(False, f"process {target.pid} ({command}) {how}, so the ROCm runtime inside it does not "
                       "accept a profiler",
                       f"restart it with `{TARGET_ENV}=1 {command}` (the variable must be set before it starts)",
                       cause="target-without-attach-env")
    return Verdict(True, f"process {target.pid} started with {TARGET_ENV}={value}")


def snapshot(machine: Machine, pid: int, duration_s: float | None) -> "Attach":
    """The `--attach PID` request with the target as /proc shows it now."""
    from profilectl.request import Attach
    target = read_target(machine, pid)
    env = None if target.environ is None else attach_enabled(target.environ.get(TARGET_ENV))
    return Attach(pid=pid, duration_s=duration_s, exists=target.exists, uid=target.uid, cmdline=target.cmdline,
                  attach_env=env, ptrace_scope=ptrace_scope(machine))


def attach_target(attach: "Attach") -> Target:
    environ = None if attach.attach_env is None else ({TARGET_ENV: "1"} if attach.attach_env else {})
    return Target(attach.pid, attach.exists, attach.uid, attach.cmdline, environ)
