"""The plan's privilege decision (privilege.py, docs/threat-model.md): who the profiler and the
workload run as and what they keep, from the probe's facts. Root is the fake machine's (its
/proc/self/status); the run is for uid 12345 ($PROFILECTL_HOST_UID, as the container services say)."""

import json

from cli_support import WORKLOAD, amd_machine, cli
from fakes import CAPS_DOCKER_DEFAULT

FOR_USER = {"PROFILECTL_HOST_UID": "12345", "PROFILECTL_HOST_GID": "12345"}
H100 = "0, NVIDIA H100 80GB HBM3, 81559, 9.0"
CAP_SYS_ADMIN_BIT = 1 << 21


def plan(machine, *args, env=FOR_USER) -> dict:
    done = cli(machine, args[0], "--dry-run", "--json", *args[1:], "--", *WORKLOAD, extra_env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_amd_counters_on_a_host_keep_no_capability(machine, tmp_path):
    amd_machine(machine, tmp_path)
    decided = plan(machine, "counters")["privilege"]
    assert decided["run_as"] == "owner" and decided["owner"] == [12345, 12345]
    assert decided["capabilities"] == []


def test_amd_counters_in_a_container_keep_perfmon_alone_where_it_can_be_had(machine, tmp_path):
    amd_machine(machine, tmp_path)
    machine.container()  # granted everything: CAP_PERFMON is narrower than CAP_SYS_ADMIN
    decided = plan(machine, "counters")["privilege"]
    assert decided["capabilities"] == ["PERFMON"] and decided["holder"] == "workload"
    assert "cap_add" in decided["reason"]


def test_amd_counters_in_a_compose_container_keep_sys_admin_and_never_ptrace(machine, tmp_path):
    amd_machine(machine, tmp_path)
    machine.container()  # the counters service: docker's default set + SYS_ADMIN + SYS_PTRACE
    machine.status(f"{int(CAPS_DOCKER_DEFAULT, 16) | CAP_SYS_ADMIN_BIT | 1 << 19:016x}", uid=0)
    decided = plan(machine, "counters")["privilege"]
    assert decided["capabilities"] == ["SYS_ADMIN"]


def test_tracing_in_a_container_keeps_nothing(machine, tmp_path):
    amd_machine(machine, tmp_path)
    machine.container()
    assert plan(machine, "trace")["privilege"]["capabilities"] == []
    assert plan(machine, "profile")["privilege"]["capabilities"] == []


def test_nvidia_counters_restricted_to_admins_are_refused_for_another_users_program(machine):
    machine.nvidia(H100, admin_only=1)
    machine.tool("ncu", "Version 2025.3.1.0\n")
    done = cli(machine, "counters", "--dry-run", "--", *WORKLOAD, extra_env=FOR_USER)
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "CAP_SYS_ADMIN to that user's program" in line, line
    assert "NVreg_RestrictProfilingToAdminUsers=0" in line and "--as-root" in line and "uid 12345" in line


def test_nvidia_refusal_falls_back_with_fallback_and_runs_as_root_when_asked(machine):
    machine.nvidia(H100, admin_only=1)
    machine.tool("ncu", "Version 2025.3.1.0\n")
    fallen = plan(machine, "counters", "--fallback")
    assert fallen["backend"] != "ncu" and fallen["privilege"]["capabilities"] == []
    assert any(f["cause"] == "capability-for-another-user" for f in fallen["fallbacks"])
    knowingly = plan(machine, "counters", "--as-root")
    assert knowingly["backend"] == "ncu" and knowingly["privilege"]["run_as"] == "root"


def test_nvidia_counters_open_to_every_user_keep_nothing(machine):
    machine.nvidia(H100, admin_only=0)
    machine.tool("ncu", "Version 2025.3.1.0\n")
    decided = plan(machine, "counters")["privilege"]
    assert decided["run_as"] == "owner" and decided["capabilities"] == []


def test_in_a_container_nvidia_counters_keep_sys_admin(machine):
    machine.nvidia(H100, admin_only=1)
    machine.tool("ncu", "Version 2025.3.1.0\n")
    machine.container()
    decided = plan(machine, "counters")["privilege"]
    assert decided["capabilities"] == ["SYS_ADMIN"] and decided["holder"] == "workload"


def test_not_root_or_root_for_itself_changes_nothing(machine, tmp_path):
    amd_machine(machine, tmp_path)
    assert plan(machine, "counters", env={})["privilege"]["run_as"] == "invoker"
    machine.status(CAPS_DOCKER_DEFAULT, uid=1000)
    assert plan(machine, "counters")["privilege"]["run_as"] == "invoker"
    done = cli(machine, "counters", "--dry-run", "--as-root", "--", *WORKLOAD, extra_env=FOR_USER)
    assert done.returncode == 2 and "--as-root: profilectl runs as uid 1000, not root" in done.stderr
