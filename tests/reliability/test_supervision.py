"""A workload against its own supervision, and time against the wall clock: a workload that kills
its step supervisor (leaving daemons that setsid and double-fork) or stops it with SIGSTOP, a wall
clock stepped back an hour or forward two days in the middle of a run, two controllers that claim
one SLURM rank at the same moment. Real processes and real signals; the wall clock is stepped inside
profilectl's own process (the machine's clock is shared and never touched)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reliability_support import manifest_of, one_line, only_run, tagged_processes, wait_for

from support import REPO


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_workload_that_kills_its_supervisor_leaves_no_daemon_behind(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "setsid sleep 301 &\nsh -c 'setsid sleep 302 & exit 0' &\nsleep 303 &\n"
                                         "sleep 1\necho ready\nkill -9 $PPID\nsleep 304\n")
    started = time.monotonic()
    done = harness.run("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                       "--", str(workload), timeout=120)
    assert done.returncode == 1, done.stderr  # failed, naming the killed supervisor
    assert time.monotonic() - started < 30
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "failed" and "supervisor" in manifest["message"], manifest["message"]
    # the harness checks that no tagged process is left (before: the setsid daemons ran on)
    wait_for(lambda: not tagged_processes(harness.tag), timeout=5, what="the daemons to be stopped")


def test_a_stopped_supervisor_cannot_stall_the_timeout(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "setsid sleep 301 &\necho ready\nkill -STOP $PPID\nsleep 302\n")
    started = time.monotonic()
    process = harness.start("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--timeout", "2",
                            "--traces-dir", str(traces), "--", str(workload))
    try:
        _, stderr = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        for pid, command in tagged_processes(harness.tag).items():
            if "supervisor.py" in command:
                os.kill(pid, signal.SIGCONT)  # let it end, so nothing is left for the next scenario
        process.kill()
        process.communicate()
        raise AssertionError("--timeout 2 did not end the run within 90 s: the stopped supervisor stalled it")
    wall = time.monotonic() - started
    assert process.returncode == 124, stderr
    assert wall < 2 + 15 + 5 + 15, wall  # the timeout, the grace, the supervisor's answer time, start-up
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "timeout" and manifest["exit_code"] == 124


def test_ctrl_c_ends_a_run_whose_supervisor_was_stopped(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "echo ready\nkill -STOP $PPID\nsleep 302\n")
    process = harness.start("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                            "--", str(workload))
    wait_for(lambda: any("supervisor.py" in c and _stopped(pid) for pid, c in tagged_processes(harness.tag).items()),
             timeout=60, what="the stopped supervisor")
    os.kill(process.pid, signal.SIGINT)
    os.kill(process.pid, signal.SIGINT)  # twice: no grace
    try:
        _, stderr = process.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError("Ctrl-C did not end the run: the stopped supervisor stalled it")
    assert process.returncode == 130, stderr
    assert manifest_of(only_run(traces))["status"] == "interrupted"


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


# profilectl with its wall clock stepped by OFFSET seconds once the file STEP_FILE exists (the
# workload creates it): datetime.now and time.time move, time.monotonic does not, as with NTP or an
# operator setting the date. Only this process's clock: the machine's is shared.
STEPPED_CLOCK = """
import datetime as _dt, os, runpy, sys, time as _time
_step_file, _offset = sys.argv[1], float(sys.argv[2])
_real_datetime, _real_time, _real_time_ns = _dt.datetime, _time.time, _time.time_ns
def _shift():
    return _offset if os.path.exists(_step_file) else 0.0
class _SteppedDatetime(_real_datetime):
    @classmethod
    def now(cls, tz=None):
        return _real_datetime.now(tz) + _dt.timedelta(seconds=_shift())
    @classmethod
    def utcnow(cls):
        return _real_datetime.utcnow() + _dt.timedelta(seconds=_shift())
_dt.datetime = _SteppedDatetime
_time.time = lambda: _real_time() + _shift()
_time.time_ns = lambda: _real_time_ns() + int(_shift() * 1e9)
sys.argv = [sys.argv[3]] + sys.argv[4:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_wall_clock_step_does_not_change_how_long_a_run_took(harness, tmp_path):
    for offset in (-3600.0, 172800.0):
        traces = harness.traces(tmp_path / f"traces{offset:+.0f}")
        step_file = tmp_path / f"stepped{offset:+.0f}"
        workload = script(tmp_path / f"w{offset:+.0f}.sh", f"sleep 0.5\ntouch {step_file}\nsleep 0.5\n")
        argv = [sys.executable, "-c", STEPPED_CLOCK, str(step_file), str(offset), str(REPO / "tools" / "profilectl"),
                "profile", "--json", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                "--", str(workload)]
        done = subprocess.run(argv, capture_output=True, text=True, env=harness.env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert step_file.exists()  # the clock did step during the run
        manifest = manifest_of(only_run(traces))
        assert 1.0 <= manifest["wall_seconds"] < 30, (offset, manifest["wall_seconds"])
        listed = json.loads(harness.run("ls", "--json", str(traces)).stdout)
        assert 1.0 <= listed[0]["wall_seconds"] < 30, listed


# Two controllers that are told they are the same rank of the same job step (a launcher's mistake, a
# re-run sharing SLURM's variables): each waits at the claim of its rank folder until both are there,
# as when they start at the same moment.
AT_THE_SAME_MOMENT = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from profilectl import runs
barrier, me = sys.argv[2], sys.argv[3]
original = runs.claim
def claim(run_dir):
    open(os.path.join(barrier, me), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return original(run_dir)
runs.claim = claim
from profilectl.cli import main
sys.exit(main(sys.argv[4:]))
"""


def test_two_controllers_claiming_one_slurm_rank(harness, tmp_path):
    traces = harness.traces()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = dict(harness.env, SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID="3", SLURM_NTASKS="4",
               SLURMD_NODENAME="node7", SLURM_JOB_START_TIME="1763683200", PROFILECTL_JOB_WAIT_S="0")
    processes = [subprocess.Popen([sys.executable, "-c", AT_THE_SAME_MOMENT, str(REPO / "src"), str(barrier), name,
                                   "profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir",
                                   str(traces), "--", "sleep", "0.5"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for name in ("first", "second")]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in processes]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results  # before: both 0, the second run in a folder nobody lists
    loser = next(stderr for code, stderr in results if code == 2)
    assert "rank 3" in one_line(loser) and "node7-rank3" in one_line(loser), loser
    job = only_run(traces)
    assert sorted(p.name for p in job.iterdir() if p.is_dir()) == ["node7-rank3"]  # no hidden second run
    listed = json.loads(harness.run("ls", "--json", str(traces)).stdout)
    assert len(listed) == 1, listed
