"""Who the profiler and the workload run as, and with which capabilities (docs/threat-model.md).

The rule: a user's program never holds a capability its user could not get otherwise.

- profilectl not root: the profiler and the workload run with profilectl's own rights (`invoker`);
  nothing is given or taken, the kernel decides.
- root running for itself (no other owner): the same (`invoker`).
- root running for another user (the owner of the traces folder, or $PROFILECTL_HOST_UID: the
  documented way into a user's traces folder, and the container services): profilectl becomes that
  user before the run directory exists (`owner`), keeping a capability across exec only where the
  profiler needs it and only when that is no gift:
  - a capability the vendor's own tool holds in a process of its own (rocprofv3's attach tool and
    CAP_SYS_PTRACE): the user's program never holds it;
  - a capability needed inside the workload's process (rocprofv3 and Nsight Compute collect counters
    there): only in a container, whose capabilities were granted (cap_add) by whoever can start
    containers on that engine and so could have them anyway. On a host this would hand root's power
    to the user's program: the plan refuses (exit 3, or --fallback) and says how to do without it,
    or how to run the workload as root knowingly (`--as-root`).
- `--as-root` (root only): the profiler and the workload run as root, as asked (`root`); the run
  directory is root's while it runs, written through a descriptor held open (never by a path the
  user could redirect), and handed back to the owner at the end.
Wherever a capability is kept, core dumps are off (RLIMIT_CORE 0, inherited across exec) and the
kernel's ptrace rule (the tracer must hold every capability the target holds) keeps the user's
other processes from tracing or reading the process that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from profilectl.facts import Facts, Verdict

INVOKER, OWNER, ROOT = "invoker", "owner", "root"
WORKLOAD, TOOL = "workload", "tool"  # who holds a needed capability: the user's program's process, or the vendor's tool
ANOTHER_USERS_PROGRAM = "capability-for-another-user"  # the refusal's cause


@dataclass(frozen=True)
class Need:
    """A capability a backend's processes need on this machine for this request."""
    capability: str  # as the kernel names it without CAP_: SYS_ADMIN, PERFMON, SYS_PTRACE
    holder: str  # WORKLOAD: the tool works inside the workload's process; TOOL: in a process of its own
    why: str
    fix: str = ""  # how to do without it (a driver setting), when there is a way


@dataclass(frozen=True)
class Privilege:
    """The plan's decision: the user the processes run as, and what they keep."""
    run_as: str  # INVOKER, OWNER or ROOT
    owner: tuple[int, int] | None = None  # (uid, gid) the run is for, when profilectl is root for someone else
    capabilities: tuple[str, ...] = ()  # kept across exec (ambient), OWNER only
    holder: str = ""  # who holds `capabilities`: WORKLOAD or TOOL
    reason: str = ""

    def note(self) -> str:
        return f"privileges: {self.reason}"


def decide(needs: tuple[Need, ...], facts: Facts, owner: tuple[int, int] | None, as_root: bool) -> Privilege | Verdict:
    """The privilege of this run, or the refusal (a Verdict) when the backend cannot be given what it
    needs without handing root's power to another user's program."""
    uid = facts.host.uid
    if uid != 0:
        return Privilege(INVOKER, reason=f"profilectl runs as uid {uid}: the profiler and the workload have exactly "
                                          "its rights")
    if owner is None or owner[0] == 0:
        return Privilege(INVOKER, reason="profilectl runs as root for root")
    if as_root:
        return Privilege(ROOT, owner, reason=f"--as-root: the profiler and the workload run as root, as asked; the "
                                             f"run directory is written through a descriptor held open and handed "
                                             f"back to uid {owner[0]} at the end")
    held = set(facts.host.effective_capabilities)
    in_workload = [n for n in needs if n.holder == WORKLOAD]
    if in_workload and not facts.host.in_container:
        need = in_workload[0]
        ways = [need.fix] if need.fix else []
        ways += [f"run profilectl as uid {owner[0]}", "pass --as-root to run the workload as root knowingly"]
        return Verdict(False, f"{need.why}; profilectl runs as root for uid {owner[0]} and does not hand root's "
                       f"CAP_{need.capability} to that user's program", "; or ".join(ways),
                       cause=ANOTHER_USERS_PROGRAM)
    kept = tuple(dict.fromkeys(n.capability for n in needs if n.capability in held))
    if not kept:
        return Privilege(OWNER, owner, reason=f"profilectl runs as uid {owner[0]} (the user the run is for) with no "
                                              "capability: the profiler needs none here")
    holder = WORKLOAD if in_workload else TOOL
    names = ", ".join(f"CAP_{c}" for c in kept)
    whys = "; ".join(dict.fromkeys(n.why for n in needs if n.capability in kept))
    if holder == WORKLOAD:
        where = ("the workload's processes hold it: this container was granted it (cap_add) by whoever starts "
                 "containers on this engine, who can have it anyway")
    else:
        where = "only the profiler's own process uses it; the program being profiled does not hold it"
    return Privilege(OWNER, owner, kept, holder,
                     reason=f"profilectl runs as uid {owner[0]} (the user the run is for), keeping only {names} "
                            f"({whys}): {where}; core dumps are off")

