"""A traces folder that stops answering in the middle of a run: a real FUSE file system
(fuse-overlayfs) whose daemon is stopped with SIGSTOP, as a network or FUSE mount hangs. The
workload's output then cannot reach stdout.log; --timeout and SIGTERM must still end the run in
bounded time, with one line saying what was left behind. Afterwards the daemon is let go, the log
writer finishes, and the run reads `abandoned` (nothing lost, nothing left running)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from reliability_support import one_line, tagged_processes, wait_for

CAN_FUSE = os.geteuid() == 0 and os.path.exists("/dev/fuse") and shutil.which("fuse-overlayfs") is not None
pytestmark = pytest.mark.skipif(not CAN_FUSE, reason="a FUSE mount needs root, /dev/fuse and fuse-overlayfs")


@pytest.fixture
def fuse_folder(harness, tmp_path):
    """A fuse-overlayfs mount and its daemon (run in the foreground, so its pid is known)."""
    for name in ("lower", "upper", "work", "mnt"):
        (tmp_path / name).mkdir()
    daemon = subprocess.Popen(["fuse-overlayfs", "-f", "-o", f"lowerdir={tmp_path / 'lower'},upperdir="
                               f"{tmp_path / 'upper'},workdir={tmp_path / 'work'}", str(tmp_path / "mnt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.ismount(tmp_path / "mnt"), timeout=20, what="the FUSE mount")
    yield tmp_path / "mnt", daemon
    daemon.send_signal(signal.SIGCONT)
    subprocess.run(["umount", "-l", str(tmp_path / "mnt")], capture_output=True)
    try:
        daemon.wait(timeout=20)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()


def workload(folder: Path) -> Path:
    path = folder / "w.sh"
    path.write_text("#!/bin/sh\necho ready\nsleep 1\nhead -c 4000000 /dev/zero | tr '\\0' 'x'\necho\nsleep 300\n")
    path.chmod(0o755)
    return path


def start_and_stall(harness, fuse_folder, tmp_path, *options: str) -> tuple[subprocess.Popen, Path]:
    mount, daemon = fuse_folder
    traces = harness.traces(mount / "traces")
    process = harness.start("profile", "--no-sample", "--repeat", "1", "--warmup", "0", *options, "--traces-dir",
                            str(traces), "--", str(workload(tmp_path)))
    wait_for(lambda: traces.is_dir() and any("ready" in _read(r / "stdout.log") for r in traces.iterdir()),
             timeout=60, what="the workload")
    daemon.send_signal(signal.SIGSTOP)  # the folder stops answering; the workload's 4 MB are still to come
    return process, traces


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def ended(process: subprocess.Popen, within: float) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"profilectl did not end within {within:g} s with its traces folder stalled") from None
    return process.returncode, stderr


def let_go(harness, fuse_folder, traces: Path) -> None:
    """The file system answers again: the log writer finishes, the run is found and reads abandoned."""
    fuse_folder[1].send_signal(signal.SIGCONT)
    wait_for(lambda: not tagged_processes(harness.tag), timeout=60, what="the log writer to finish")
    listed = json.loads(harness.run("ls", "--json", str(traces)).stdout)
    assert [run["status"] for run in listed] == ["abandoned"], listed


def test_timeout_ends_a_run_whose_traces_folder_stopped_answering(harness, fuse_folder, tmp_path):
    started = time.monotonic()
    process, traces = start_and_stall(harness, fuse_folder, tmp_path, "--timeout", "8")
    code, stderr = ended(process, within=120)
    assert code == 124, stderr
    line = one_line(stderr)
    assert "stopped answering" in line and "left behind" in line, line
    assert time.monotonic() - started < 8 + 15 + 60
    let_go(harness, fuse_folder, traces)


def test_sigterm_ends_a_run_whose_traces_folder_stopped_answering(harness, fuse_folder, tmp_path):
    process, traces = start_and_stall(harness, fuse_folder, tmp_path)
    time.sleep(2)  # the workload's output is now stuck on its way to stdout.log
    os.kill(process.pid, signal.SIGTERM)
    code, stderr = ended(process, within=120)
    assert code == 130, stderr
    ending = [line for line in stderr.splitlines() if "stopped answering" in line]
    assert len(ending) == 1 and "left behind" in ending[0], stderr  # besides the line that said SIGTERM was taken
    let_go(harness, fuse_folder, traces)
