"""A user's program never holds a capability its user could not get otherwise (docs/threat-model.md).

Root runs `counters` for a real unprivileged user (the documented way into that user's traces
folder), with the rocprofv3 double, whose counters run inside the workload's process as AMD's do.
The workload is the user's program, and it attacks: it reads its own capabilities, tries to ptrace a
root process and read that process's memory, and mounts a file system. Before the fix it held
CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_PERFMON as ambient capabilities and every attack worked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from cli_support import amd_machine
from fakes import FakeMachine
from reliability_support import as_user, stop, user_python
from support import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root running for another user needs root (and useradd)")

CAP_PERFMON = 1 << 38

# The user's program: what it holds, and what it can do to root with it. Written where it runs (its
# working folder is the user's); waits for `release` so that another process of the user can try it.
ATTACKER = r'''
import ctypes, ctypes.util, errno, json, os, resource, sys, time
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
out, target = {"uid": os.getuid(), "pid": os.getpid()}, int(sys.argv[2])
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapEff", "CapPrm", "CapAmb"):
        out[key] = int(value, 16)
if libc.ptrace(16, target, None, None) == 0:  # PTRACE_ATTACH to a root process
    out["ptrace_root"] = 0
    os.waitpid(target, 0)
    libc.ptrace(17, target, None, None)
else:
    out["ptrace_root"] = ctypes.get_errno()
try:
    with open(f"/proc/{target}/mem", "rb"):
        out["mem_root"] = 0
except OSError as exc:
    out["mem_root"] = exc.errno
os.makedirs("mnt", exist_ok=True)
if libc.mount(b"none", b"mnt", b"tmpfs", 0, None) == 0:
    out["mount"] = 0
    libc.umount2(b"mnt", 2)
else:
    out["mount"] = ctypes.get_errno()
out["core_limit"] = resource.getrlimit(resource.RLIMIT_CORE)[0]
with open(sys.argv[1] + ".tmp", "w") as fh:
    json.dump(out, fh)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[1] + ".release") and time.monotonic() < deadline:
    time.sleep(0.05)
'''


@pytest.fixture
def root_process():
    """A process of root's that the user's program must not be able to touch."""
    process = subprocess.Popen(["sleep", "300"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def user_machine(base: Path, user: tuple[int, int], container: bool) -> tuple[FakeMachine, Path, Path]:
    """An MI300X host (or container) seen by the probe, the user's traces and working folders, all
    reachable by the user (the double and the fake root live in a 0755 folder)."""
    home = base / "machine"
    home.mkdir()
    machine = amd_machine(FakeMachine(home), home)
    if container:
        machine.container()
    double = machine.bin / "rocprofv3"  # run by the user: an interpreter the user can start
    double.write_text(f"#!{user_python()[0]}\n" + double.read_text().split("\n", 1)[1])
    for path in [home, *home.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o055)
    traces, work = base / "traces", base / "work"
    for folder in (traces, work):
        folder.mkdir()
        os.chown(folder, *user)
    (work / "attack.py").write_text(ATTACKER)
    return machine, traces, work


def root_counters_for(machine: FakeMachine, traces: Path, work: Path, *args: str) -> subprocess.Popen:
    python, path = user_python()
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), PATH=machine.path_with_bin(),
               FAKE_COUNTERS=str(machine.counters_file), FAKE_ROCM_RELEASE="7.0", PYTHONPATH=path)
    for name in ("PROFILECTL_HOST_UID", "PROFILECTL_HOST_GID"):
        env.pop(name, None)
    return subprocess.Popen([python, str(REPO / "tools/profilectl"), "counters", "--json", "--no-sample",
                             "--traces-dir", str(traces), *args],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            out, err = process.communicate(timeout=30)
            raise AssertionError(f"the workload never reported (exit {process.returncode}): {err[-3000:]}")
        time.sleep(0.05)
    return json.loads(path.read_text())


def test_root_counters_for_a_user_gives_that_users_program_no_capability(user, base, root_process):
    """On a host, AMD counters need no capability: the user's program runs as the user with none, and
    every attack on root fails with EPERM."""
    machine, traces, work = user_machine(base, user, container=False)
    report = work / "report.json"
    process = root_counters_for(machine, traces, work, "--", user_python()[0], str(work / "attack.py"), str(report),
                                str(root_process))
    try:
        seen = wait_for(report, process)
    finally:
        (work / "report.json.release").touch()
    out, err = process.communicate(timeout=120)
    assert seen["uid"] == user[0]
    assert (seen["CapEff"], seen["CapPrm"], seen["CapAmb"]) == (0, 0, 0), seen
    assert seen["ptrace_root"] != 0 and seen["mem_root"] != 0 and seen["mount"] != 0, seen
    result = json.loads(out)
    assert result["exit_code"] == 0, (result["message"], err[-2000:])
    notes = " ".join(result["manifest"]["notes"])
    assert f"runs as uid {user[0]} (the user the run is for) with no capability" in notes, notes


def test_in_a_container_the_workload_keeps_only_the_one_capability_counters_need(user, base, root_process):
    """In a container granted everything (CapEff all), AMD counters need CAP_PERFMON (or SYS_ADMIN):
    the workload keeps only that one, no ptrace, no mount, no core dumps, and the user's other
    processes cannot trace it or read its memory (the kernel's capability-subset rule)."""
    machine, traces, work = user_machine(base, user, container=True)
    report = work / "report.json"
    process = root_counters_for(machine, traces, work, "--", user_python()[0], str(work / "attack.py"), str(report),
                                str(root_process))
    try:
        seen = wait_for(report, process)
        attempts = base / "sibling.json"

        def sibling() -> None:
            try:
                attempt()
            except BaseException as exc:
                Path(str(attempts) + ".error").write_text(repr(exc))

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)  # loaded before the fork: root's
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]  # stdlib

        def attempt() -> None:  # another process of the same user, without the capability
            result = {"ptrace": 0 if libc.ptrace(16, seen["pid"], None, None) == 0 else ctypes.get_errno()}
            try:
                with open(f"/proc/{seen['pid']}/mem", "rb"):
                    result["mem"] = 0
            except OSError as exc:
                result["mem"] = exc.errno
            Path(str(attempts) + ".tmp").write_text(json.dumps(result))
            os.rename(str(attempts) + ".tmp", attempts)
            time.sleep(60)
        (base).chmod(0o777)
        other = as_user(user, sibling)
        try:
            deadline = time.monotonic() + 30
            while not attempts.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not Path(str(attempts) + ".error").exists(), Path(str(attempts) + ".error").read_text()
            tried = json.loads(attempts.read_text())
        finally:
            stop(other)
    finally:
        (work / "report.json.release").touch()
    out, err = process.communicate(timeout=120)
    assert seen["uid"] == user[0]
    assert seen["CapAmb"] == CAP_PERFMON and seen["CapPrm"] == CAP_PERFMON, seen  # PERFMON, nothing else
    assert seen["ptrace_root"] != 0 and seen["mem_root"] != 0 and seen["mount"] != 0, seen
    assert seen["core_limit"] == 0
    assert tried["ptrace"] != 0 and tried["mem"] != 0, tried
    result = json.loads(out)
    assert result["exit_code"] == 0, (result["message"], err[-2000:])
    notes = " ".join(result["manifest"]["notes"])
    assert "keeping only CAP_PERFMON" in notes, notes


def test_as_root_runs_the_workload_as_root_and_hands_the_run_back(user, base, root_process):
    """--as-root: root's program, knowingly; the run directory is written through the descriptor
    held open and belongs to the user at the end."""
    machine, traces, work = user_machine(base, user, container=False)
    report = work / "report.json"
    (work / "report.json.release").touch()
    process = root_counters_for(machine, traces, work, "--as-root", "--", user_python()[0], str(work / "attack.py"),
                                str(report), str(root_process))
    out, err = process.communicate(timeout=120)
    result = json.loads(out)
    assert result["exit_code"] == 0, (result["message"], err[-2000:])
    assert json.loads(report.read_text())["uid"] == 0
    run = Path(result["run_dir"])
    assert run.parent == traces
    assert {os.lstat(p).st_uid for p in [run, *run.rglob("*")]} == {user[0]}
    notes = " ".join(result["manifest"]["notes"])
    assert "--as-root" in notes and "/proc/" in notes, notes
    assert json.loads((run / "summary.json").read_text())["source"]["path"] == str(run)


def test_a_slurm_task_for_a_user_makes_the_job_folder_as_that_user(user, base, root_process):
    """slurmd runs tasks as root; the first rank of a job finds no job folder yet. Before: the check
    asked whether the user could write that folder, which does not exist, and every rank refused
    (the SLURM cluster's jobs all exited 2). Now the nearest folder that exists is asked, and the job
    folder and the rank's run are made by the user."""
    machine, traces, work = user_machine(base, user, container=False)
    report = work / "report.json"
    (work / "report.json.release").touch()
    python, path = user_python()
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), PATH=machine.path_with_bin(),
               FAKE_COUNTERS=str(machine.counters_file), FAKE_ROCM_RELEASE="7.0", PYTHONPATH=path,
               SLURM_JOB_ID="77", SLURM_STEP_ID="0", SLURM_PROCID="0", SLURM_NTASKS="1", SLURM_NNODES="1",
               SLURMD_NODENAME="node1", SLURM_JOB_START_TIME="1795790000")
    for name in ("PROFILECTL_HOST_UID", "PROFILECTL_HOST_GID"):
        env.pop(name, None)
    done = subprocess.run([python, str(REPO / "tools/profilectl"), "counters", "--json", "--no-sample",
                           "--traces-dir", str(traces), "--", python, str(work / "attack.py"), str(report),
                           str(root_process)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(report.read_text())["uid"] == user[0]
    job = next(traces.glob("*-counters-job77.0"))
    assert (job / "node1-rank0" / "manifest.json").is_file()
    assert {os.lstat(p).st_uid for p in [job, *job.rglob("*")]} == {user[0]}
