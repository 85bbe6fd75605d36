"""`trace/counters --attach PID`: a real process started with ROCP_TOOL_ATTACH=1, profiled by the
rocprofv3 double (which checks the argv and the ptrace preconditions the real attach needs, and
detaches only when Enter arrives or its duration ends); the run directory records the target's
command line; Ctrl-C, --timeout and profilectl's own death detach cleanly (the database is written,
the target lives on); each refusal is one line with its fix."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import amd_machine, cli, json_run
from fakes import CAPS_DOCKER_DEFAULT

TARGET = [sys.executable, "-c", "import time\nfor _ in range(600): time.sleep(0.1)", "serve", "--port", "8000"]


@pytest.fixture
def target():
    process = subprocess.Popen(TARGET, env=dict(os.environ, ROCP_TOOL_ATTACH="1"))
    time.sleep(0.2)
    yield process
    process.kill()
    process.wait()


def attach_machine(machine, tmp_path, process, rocm="7.1.0", scope="1", caps="000001ffffffffff"):
    amd_machine(machine, tmp_path, rocm=rocm)
    machine.write("/proc/sys/kernel/yama/ptrace_scope", scope + "\n")
    machine.status(caps, uid=os.geteuid())
    os.symlink(f"/proc/{process.pid}", machine.root / "proc" / str(process.pid))  # the real target, seen in the fake root
    machine.attach_log = tmp_path / "attach.log"
    return {"FAKE_PROC_ROOT": str(machine.root), "FAKE_ATTACH_LOG": str(machine.attach_log)}


def dispatches(run: Path) -> int:
    total = 0
    for db in (run / "raw").rglob("*_results.db"):
        with sqlite3.connect(db) as con:
            try:
                total += con.execute("SELECT count(*) FROM rocpd_kernel_dispatch").fetchone()[0]
            except sqlite3.OperationalError:  # the tool is still creating its schema: nothing written yet
                pass
    return total


def test_attach_profiles_a_running_process_for_the_duration(machine, tmp_path, target):
    env = attach_machine(machine, tmp_path, target)
    result, run = json_run(machine, "trace", "--attach", str(target.pid), "--duration", "1", extra_env=env)
    assert result["status"] == "ok", result["message"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload"] == TARGET and manifest["workload_source"] == "attach"
    tool_argv = manifest["argv"][manifest["argv"].index("--") + 1:]
    assert tool_argv[tool_argv.index("--attach") + 1] == str(target.pid)
    assert tool_argv[tool_argv.index("--attach-duration-msec") + 1] == "1000"
    assert "--attach" in machine.attach_log.read_text()
    assert result["summary"]["kernels"][0]["name"].startswith("attached_kernel") and dispatches(run) >= 5
    assert any(f"attached to running process {target.pid}" in n for n in manifest["notes"])
    assert target.poll() is None  # never signalled


def test_counters_attach_one_pass(machine, tmp_path, target):
    env = attach_machine(machine, tmp_path, target, rocm="7.13.0")
    done = cli(machine, "counters", "--attach", str(target.pid), "--duration", "0.5", "--set", "extended",
               extra_env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "one counter pass" in done.stderr and "needs 2" in done.stderr
    result, run = json_run(machine, "counters", "--attach", str(target.pid), "--duration", "0.5", extra_env=env)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert argv.count("--pmc") == 1 and result["summary"]["counters_by_kernel"]


@pytest.mark.parametrize("how", ["timeout", "ctrl-c", "docker-stop", "killed"])
def test_attach_detaches_cleanly_when_stopped(machine, tmp_path, target, how):
    """No --duration: the double, as AMD's attach tool, detaches on Enter or SIGINT and dies still
    attached, writing nothing, on SIGTERM. Every way profilectl stops the session sends SIGINT
    first: --timeout, Ctrl-C, `docker stop` (SIGTERM to profilectl) and profilectl's own death (the
    supervisor's lifeline)."""
    env = attach_machine(machine, tmp_path, target)
    traces = machine.root.parent / "traces"
    args = ["trace", "--attach", str(target.pid)] + (["--timeout", "1.5"] if how == "timeout" else [])
    if how == "timeout":
        done = cli(machine, *args, extra_env=env)
        assert done.returncode == 124, done.stderr
    else:
        from cli_support import REPO
        full = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), PATH=machine.path_with_bin(),
                    FAKE_COUNTERS=str(machine.counters_file), FAKE_ROCM_RELEASE="7.1", **env)
        proc = subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "trace", "--traces-dir", str(traces),
                                 *args[1:]], env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not machine.attach_log.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.8)
        proc.send_signal({"ctrl-c": signal.SIGINT, "docker-stop": signal.SIGTERM}.get(how, signal.SIGKILL))
        code = proc.wait(timeout=30)
        assert code == {"ctrl-c": 130, "docker-stop": 130}.get(how, -9), proc.stderr.read() if proc.stderr else ""
    run = next(traces.iterdir())
    deadline = time.monotonic() + 10  # killed: the supervisor finishes the detach on its own
    while not dispatches(run) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert dispatches(run) >= 3  # the tool detached and wrote its database
    if how != "killed":
        status = json.loads((run / "manifest.json").read_text())["status"]
        assert status == {"timeout": "timeout", "ctrl-c": "interrupted", "docker-stop": "interrupted"}[how]
    if how != "killed":  # a killed profilectl no longer copies the session's stderr into the log
        assert "detaching from" in (run / "stderr.log").read_text()
    assert target.poll() is None


@pytest.mark.parametrize("case, words", [
    ("no-capability", ["ptrace_scope is 1", "CAP_SYS_PTRACE", "Fix:", "SYS_PTRACE"]),
    ("scope-3", ["ptrace_scope is 3", "Fix:", "kernel.yama.ptrace_scope"]),
    ("no-variable", ["not started with ROCP_TOOL_ATTACH=1", "Fix:", "restart it with `ROCP_TOOL_ATTACH=1"]),
    ("release-7.0", ["cannot attach", "from ROCm 7.1", "Fix:"]),
])
def test_attach_refusals_are_one_line_with_the_fix(machine, tmp_path, case, words):
    environment = dict(os.environ)
    if case != "no-variable":
        environment["ROCP_TOOL_ATTACH"] = "1"
    process = subprocess.Popen(TARGET, env=environment)
    try:
        env = attach_machine(machine, tmp_path, process, rocm="7.0.2" if case == "release-7.0" else "7.2.0",
                             scope="3" if case == "scope-3" else "1",
                             caps=CAPS_DOCKER_DEFAULT if case == "no-capability" else "000001ffffffffff")
        done = cli(machine, "trace", "--attach", str(process.pid), extra_env=env)
    finally:
        process.kill()
        process.wait()
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
    assert not machine.attach_log.exists()  # refused before rocprofv3 ran


@pytest.mark.parametrize("value, accepted", [
    ("1", True), ("2", True), ("true", True), ("On", True), ("YES", True), ("enabled", True),
    ("0", False), ("00", False), ("off", False), ("FALSE", False), ("no", False), ("N", False), ("f", False),
    ("", False),
])
def test_the_attach_variable_is_read_as_the_rocm_runtime_reads_it(machine, tmp_path, value, accepted):
    """rocprofiler-register's boolean: digits a number (non-zero on), other words off only when
    off/false/no/n/f in any case; empty is an error in the runtime, so no attach either."""
    process = subprocess.Popen(TARGET, env=dict(os.environ, ROCP_TOOL_ATTACH=value))
    try:
        env = attach_machine(machine, tmp_path, process)
        done = cli(machine, "trace", "--attach", str(process.pid), "--duration", "0.3", extra_env=env)
    finally:
        process.kill()
        process.wait()
    if accepted:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 3 and "ROCP_TOOL_ATTACH" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not machine.attach_log.exists()


def test_attach_on_nvidia_says_what_attach_cannot_do(machine, target):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 9.0, 81559")
    machine.python_with_torch("2.5.1+cu124", hip=None, cuda="12.4")
    os.symlink(f"/proc/{target.pid}", machine.root / "proc" / str(target.pid))
    for service, word in (("trace", "torch.profiler runs inside the Python process"),
                          ("counters", "Nsight Compute cannot attach")):
        done = cli(machine, service, "--attach", str(target.pid))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 3 and len(lines) == 1 and word in lines[0], done.stderr


def test_attach_usage_errors(machine, tmp_path, target):
    env = attach_machine(machine, tmp_path, target)
    for args, word in ((["--attach", "999999999"], "no such process"),
                       (["--duration", "3"], "--duration goes with --attach"),
                       (["--attach", str(target.pid), "--", "python3", "x.py"], "give no workload")):
        done = cli(machine, "trace", *args, extra_env=env)
        assert done.returncode == 2 and word in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("rocm, scope, caps, available, word", [
    ("7.1.0", "1", "000001ffffffffff", True, "ROCP_TOOL_ATTACH=1"),
    ("7.1.0", "1", CAPS_DOCKER_DEFAULT, False, "CAP_SYS_PTRACE"),
    ("7.1.0", "3", "000001ffffffffff", False, "ptrace_scope is 3"),
    ("7.0.2", "0", "000001ffffffffff", False, "from ROCm 7.1"),
])
def test_env_check_says_whether_attach_is_possible(machine, tmp_path, monkeypatch, rocm, scope, caps, available, word):
    amd_machine(machine, tmp_path, rocm=rocm)
    monkeypatch.setenv("FAKE_ROCM_RELEASE", rocm)  # the double's --version: the SDK of this release
    machine.write("/proc/sys/kernel/yama/ptrace_scope", scope + "\n")
    machine.status(caps, uid=0)
    verdict = machine.probe().assessment.capabilities["attach"]
    assert verdict.available is available and word in verdict.reason + (verdict.fix or ""), verdict


def test_an_attached_targets_secrets_are_never_written(machine, tmp_path):
    """The target's command line comes from /proc, not from profilectl's own argv: it is redacted
    the same way (the manifest's workload and notes, the dry-run plan)."""
    secret_target = [sys.executable, "-c", "import time\nfor _ in range(600): time.sleep(0.1)", "serve",
                     "--password", "attach-pw-1", "--apiKey=attach-key-2", "https://u:attach-url-3@h/x?token=attach-4"]
    process = subprocess.Popen(secret_target, env=dict(os.environ, ROCP_TOOL_ATTACH="1"))
    try:
        time.sleep(0.2)
        env = attach_machine(machine, tmp_path, process)
        result, run = json_run(machine, "trace", "--attach", str(process.pid), "--duration", "0.5", extra_env=env)
        assert result["status"] == "ok", result["message"]
        dry = cli(machine, "trace", "--attach", str(process.pid), "--duration", "0.5", "--dry-run", "--json",
                  extra_env=env)
        written = {p.name: p.read_text(errors="replace") for p in run.rglob("*") if p.is_file() and p.suffix != ".db"}
        written["dry run"] = dry.stdout
        leaked = {name: [s for s in ("attach-pw-1", "attach-key-2", "attach-url-3", "attach-4") if s in text]
                  for name, text in written.items()}
        assert not any(leaked.values()), leaked
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["workload"][4:6] == ["--password", "<redacted>"]
        assert any("--password <redacted>" in note for note in manifest["notes"]), manifest["notes"]
    finally:
        process.kill()
        process.wait()
