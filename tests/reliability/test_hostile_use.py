"""What a user (or a co-tenant) can do to a run on purpose: a reader that never reads profilectl's
output, Ctrl-C twice, a killed step supervisor, a run folder made read-only, `report -o` aimed at a
device node, secrets in the workload's own arguments. Real processes, real blocked pipes, real
read-only mounts."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from reliability_support import CAN_MOUNT, manifest_of, one_line, only_run, tagged_processes, wait_for


def log_has(run_dir: Path, name: str, text: str) -> bool:
    try:
        return text in (run_dir / name).read_text(errors="replace")
    except OSError:
        return False


def start_until_ready(harness, traces: Path, repeat: str, *workload: str) -> subprocess.Popen:
    """`profile --repeat REPEAT -- WORKLOAD` (no sampling, no warm-up), once the workload has printed
    `ready`."""
    process = harness.start("profile", "--no-sample", "--repeat", repeat, "--warmup", "0", "--traces-dir", str(traces),
                            "--", *workload)
    wait_for(lambda: traces.is_dir() and any(log_has(r, "stdout.log", "ready") for r in traces.iterdir()),
             what="the workload")
    return process


def start_blocked(harness, *args: str) -> tuple[subprocess.Popen, int]:
    """profilectl with its stdout on a pipe that nobody reads (the read end held open, like
    `| (sleep 600)`): the process and the read end, to close afterwards."""
    read_end, write_end = os.pipe()
    env = dict(harness.env, PROFILECTL_OUTPUT_WAIT_S="2")
    process = subprocess.Popen(harness.argv(*args), stdout=write_end, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=harness.tmp_path)
    os.close(write_end)
    return process, read_end


def test_a_blocked_stdout_neither_stops_the_timeout_nor_disagrees_with_the_manifest(harness):
    traces = harness.traces()
    started = time.monotonic()
    process, read_end = start_blocked(harness, "trace", "--no-sample", "--timeout", "3", "--traces-dir",
                                      str(traces), "--", "yes")
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(read_end)
    wall = time.monotonic() - started
    assert process.returncode == 124, stderr
    assert wall < 3 + 15 + 2 + 10, wall  # timeout, the grace at most, the bounded wait for the reader
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "timeout" and manifest["exit_code"] == 124
    assert any("the terminal stopped reading" in note for note in manifest["notes"]), manifest["notes"]
    assert "stdout did not take the result" in stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_work_while_stdout_is_blocked(harness, signum):
    traces = harness.traces()
    process, read_end = start_blocked(harness, "trace", "--no-sample", "--traces-dir", str(traces), "--", "yes")
    try:
        wait_for(lambda: traces.is_dir() and any(log_has(r, "stdout.log", "y\ny\n") for r in traces.iterdir()),
                 what="the workload")
        time.sleep(0.5)  # the pipe is full by now: the echo is blocked
        os.kill(process.pid, signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(read_end)
    assert process.returncode == 130, stderr
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130


def test_a_second_ctrl_c_cuts_the_grace_and_says_so(harness, tmp_path):
    traces = harness.traces()
    workload = tmp_path / "stubborn.sh"
    workload.write_text("#!/bin/sh\ntrap '' INT TERM\necho ready\nwhile :; do sleep 1; done\n")
    workload.chmod(0o755)
    process = start_until_ready(harness, traces, "1", str(workload))
    os.kill(process.pid, signal.SIGINT)
    time.sleep(1.0)
    first = time.monotonic()
    os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert time.monotonic() - first < 8, "the second Ctrl-C did not cut the 15 s grace"
    assert process.returncode == 130, stderr
    assert "stopping the workload; it has up to 15 s" in stderr  # said while waiting
    assert "SIGINT again: killing the workload now" in stderr
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "interrupted"
    assert any("cut the 15 s grace short" in note for note in manifest["notes"]), manifest["notes"]


def test_a_killed_step_supervisor_is_a_failure_with_its_cause(harness, tmp_path):
    traces = harness.traces()
    process = start_until_ready(harness, traces, "3", "sh", "-c", "echo ready; sleep 300")
    supervisor = next(pid for pid, command in tagged_processes(harness.tag).items() if "supervisor.py" in command)
    os.kill(supervisor, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    manifest = manifest_of(only_run(traces))
    assert manifest["status"] == "failed" and manifest["exit_code"] == 1, manifest["message"]
    assert "supervisor" in manifest["message"] and "SIGKILL" in manifest["message"], manifest["message"]
    assert [s["exit_code"] for s in manifest["steps"]] == [None, None, None]
    assert (only_run(traces) / "stderr.log").read_text().count("==> profilectl: run") == 1  # none started after
    assert "no-output" not in stderr


@pytest.mark.skipif(not CAN_MOUNT, reason="a read-only bind mount needs root with mount rights")
def test_a_run_folder_made_read_only_is_said_as_such(harness, tmp_path):
    traces = harness.traces()
    process = start_until_ready(harness, traces, "1", "sh", "-c", "echo ready; sleep 2; echo done")
    run = only_run(traces)
    subprocess.run(["mount", "--bind", str(run), str(run)], check=True)
    harness.mounts.append(run)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(run)], check=True)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    line = one_line(stderr)
    assert "became read-only" in line and str(run) in line, line
    assert ".reserve" not in line and ".tmp" not in line, line


def device_like(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"target-{kind}"
    if kind == "char-device":
        if os.geteuid() != 0:
            return Path("/dev/null")  # never replaced either way; a private node needs root
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device of our own
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["char-device", "fifo", "socket", "folder"])
@pytest.mark.parametrize("force", [False, True])
def test_report_output_never_replaces_what_is_not_a_regular_file(harness, tmp_path, kind, force):
    traces = harness.traces()
    done = harness.run("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                       "--", "true")
    assert done.returncode == 0, done.stderr
    target = device_like(tmp_path, kind)
    before = os.lstat(target)
    shown = harness.run("report", str(only_run(traces)), "--format", "md", "-o", str(target),
                        *(["--force"] if force else []))
    assert shown.returncode == 2, shown.stderr
    assert "refusing" in one_line(shown.stderr) or "is a folder" in one_line(shown.stderr)
    after = os.lstat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)


SECRETS = {"--password=hunter2-pw": "hunter2-pw", "tok-123-abc": "tok-123-abc", "key-9f8e7d": "key-9f8e7d",
           "DB_SECRET=s3cr3t-val": "s3cr3t-val", "https://bob:urlpass77@example.com/data": "urlpass77"}


def test_secrets_of_the_workload_are_in_no_file_profilectl_writes(harness, tmp_path):
    traces = harness.traces()
    argv = ["sh", "-c", "true", "--password=hunter2-pw", "--token", "tok-123-abc", "--api-key", "key-9f8e7d",
            "DB_SECRET=s3cr3t-val", "https://bob:urlpass77@example.com/data"]
    done = harness.run("profile", "--json", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir",
                       str(traces), "--env", "HF_TOKEN=hf-envtoken1", "--", *argv)
    assert done.returncode == 0, done.stderr
    run = only_run(traces)
    values = [*SECRETS.values(), "hf-envtoken1"]
    texts = {str(p): p.read_text(errors="replace") for p in run.rglob("*") if p.is_file()}
    out = tmp_path / "reports"
    out.mkdir()
    for fmt in ("md", "html", "json"):
        shown = harness.run("report", str(run), "--format", fmt, "-o", str(out / f"r.{fmt}"))
        assert shown.returncode == 0, shown.stderr
    csv = harness.run("report", str(run), "--format", "csv", "-o", f"{out}/")
    assert csv.returncode == 0, csv.stderr
    texts.update({str(p): p.read_text() for p in out.iterdir()})
    texts["stdout of profile --json"] = done.stdout
    texts["dry run"] = harness.run("profile", "--dry-run", "--traces-dir", str(traces), "--", *argv).stdout
    leaked = {name: [v for v in values if v in text] for name, text in texts.items() if any(v in text for v in values)}
    assert leaked == {}, leaked
    manifest = manifest_of(run)
    assert "<redacted>" in manifest["workload"] and "https://bob:<redacted>@example.com/data" in manifest["workload"]
    assert json.loads(done.stdout)["manifest"]["phases"][0]["environment"]["HF_TOKEN"] == "<redacted>"


def test_no_redact_writes_the_arguments_as_given(harness):
    traces = harness.traces()
    done = harness.run("profile", "--no-redact", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir",
                       str(traces), "--", "sh", "-c", "true", "--token", "tok-123-abc")
    assert done.returncode == 0, done.stderr
    assert "tok-123-abc" in manifest_of(only_run(traces))["workload"]
