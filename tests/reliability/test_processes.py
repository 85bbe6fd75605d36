"""Process lifetime: nothing a run starts outlives it, and profilectl never waits on pipes that a
background grandchild holds. Real workloads (sh scripts that fork, daemonise and ignore SIGTERM),
real signals, including SIGKILL of profilectl itself."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from reliability_support import manifest_of, one_line, only_run, tagged_processes, wait_for

from profilectl.backends.base import Step
from profilectl.runner import Interrupted, Runner


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def log_has(run_dir: Path, name: str, text: str) -> bool:
    try:
        return text in (run_dir / name).read_text()
    except OSError:
        return False


def test_sigkill_of_profilectl_stops_the_whole_tree_and_the_run_reads_as_abandoned(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "echo started-marker\nsleep 300 &\nsetsid sleep 301 &\n"
                                         "sh -c 'sleep 302 & wait' &\nsleep 303\n")
    controller = harness.start("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--",
                               str(workload))
    wait_for(lambda: any(log_has(r, "stdout.log", "started-marker") for r in harness.runs()), what="the workload")
    wait_for(lambda: sum("sleep" in c for c in tagged_processes(harness.tag).values()) >= 4, what="its children")
    listed = json.loads(harness.run("ls", "--json", str(traces)).stdout)
    assert listed[0]["status"] == "running", listed  # alive: its profilectl holds the run's lock

    os.kill(controller.pid, signal.SIGKILL)
    controller.wait()
    wait_for(lambda: not tagged_processes(harness.tag), timeout=10, what="the tree to be stopped")

    run = only_run(traces)
    assert manifest_of(run)["status"] == "running"  # nobody could finalise it: that is what ls must see through
    listed = json.loads(harness.run("ls", "--json", str(traces)).stdout)
    assert listed[0]["status"] == "abandoned" and "stdout.log" in listed[0]["problem"], listed
    shown = harness.run("report", str(run))
    assert shown.returncode == 0 and "abandoned" in shown.stdout and "None" not in shown.stdout, shown
    assert "started-marker" in (run / "stdout.log").read_text()  # what the workload wrote is kept


def test_a_background_child_neither_holds_the_run_nor_survives_it(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "sleep 300 &\nsetsid sleep 301 &\necho main-done\n")
    started = time.monotonic()
    done = harness.run("profile", "--json", "--repeat", "2", "--warmup", "0", "--traces-dir", str(traces), "--",
                       str(workload))
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert wall < 10, wall  # it used to wait 2 x 15 s on the pipes the children held
    result = json.loads(done.stdout)
    assert [s["exit_code"] for s in result["manifest"]["steps"]] == [0, 0]
    assert all(s["seconds"] < 2 for s in result["manifest"]["steps"]), result["manifest"]["steps"]
    stderr_log = (Path(result["run_dir"]) / "stderr.log").read_text()
    assert stderr_log.count("stopped 2 process(es) the step left running") == 2, stderr_log


def test_timeout_stops_children_that_ignore_sigterm_or_left_the_session(harness, tmp_path):
    traces = harness.traces()
    workload = script(tmp_path / "w.sh", "sh -c 'trap \"\" TERM; sleep 300' &\nsetsid sh -c 'sleep 301' &\n"
                                         "echo ready\nsleep 302\n")
    started = time.monotonic()
    done = harness.run("profile", "--timeout", "1", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                       "--", str(workload))
    wall = time.monotonic() - started
    assert done.returncode == 124, done.stderr
    assert "timeout" in one_line(done.stderr)
    assert wall < 1 + 15 + 10, wall  # SIGTERM, then SIGKILL after the 15 s grace
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "timeout" and manifest["exit_code"] == 124
    assert "ready" in (only_run(traces) / "stdout.log").read_text()


def test_sigint_and_sigterm_to_profilectl_end_the_run_as_interrupted(harness, tmp_path):
    workload = script(tmp_path / "w.sh", "echo ready\nsleep 300 &\nsleep 301\n")
    for signum, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        traces = harness.traces(tmp_path / f"traces-{name}")
        controller = harness.start("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--",
                                   str(workload))
        wait_for(lambda: traces.is_dir() and any(log_has(r, "stdout.log", "ready") for r in traces.iterdir()),
                 what="the workload")
        os.kill(controller.pid, signum)
        _, stderr = controller.communicate(timeout=30)
        assert controller.returncode == 130, stderr
        manifest = manifest_of(only_run(traces))
        assert manifest["status"] == "interrupted" and name in manifest["message"]


def test_step_time_is_the_workload_alone(harness, tmp_path):
    """The supervisor's own start-up is not measured: a 0.3 s sleep is timed as 0.3 s."""
    traces = harness.traces()
    done = harness.run("profile", "--json", "--repeat", "3", "--warmup", "0", "--traces-dir", str(traces), "--",
                       "sleep", "0.3")
    assert done.returncode == 0, done.stderr
    seconds = [s["seconds"] for s in json.loads(done.stdout)["manifest"]["steps"]]
    assert all(0.3 <= s < 0.6 for s in seconds), seconds


def test_runner_never_waits_on_pipes_a_sigterm_ignoring_grandchild_holds(harness, tmp_path):
    """In-process: the grace is short here, so the step ends 1 s after its main process, not never."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # the main process ends once the grandchild has written its line (on a loaded machine starting
    # the grandchild's shell can take longer than the grace)
    ready = tmp_path / "child-ready"
    workload = script(tmp_path / "w.sh", f"sh -c 'trap \"\" TERM; echo child; touch {ready}; sleep 300' &\n"
                                         f"while [ ! -e {ready} ]; do sleep 0.05; done\necho parent\n")
    started = time.monotonic()
    with Runner(run_dir, None, None, kill_grace_s=1.0) as runner:
        result = runner.run(Step((str(workload),), "run 1/1"), {"PROFILECTL_RELIABILITY_TAG": harness.tag})
    assert result.returncode == 0 and result.seconds < 5, result
    assert time.monotonic() - started < result.seconds + 5  # the grace after the main process, not the sleep
    assert not tagged_processes(harness.tag)
    assert sorted((run_dir / "stdout.log").read_text().splitlines()) == ["child", "parent"]
    assert "the step left running (SIGTERM, SIGKILL after 1 s)" in (run_dir / "stderr.log").read_text()


def test_a_signal_while_no_step_runs_interrupts_the_reading_not_profilectl(tmp_path):
    """Between steps and while the tables are written, SIGTERM becomes Interrupted (the run is then
    finalised as interrupted) instead of killing profilectl with its manifest still `running`."""
    with Runner(tmp_path, None, None) as runner:
        with pytest.raises(Interrupted):
            with runner.interruptible():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
    assert runner.interrupted == signal.SIGTERM
