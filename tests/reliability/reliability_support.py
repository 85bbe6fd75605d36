"""Reliability scenarios: profilectl run for real (its command line, real workloads, real signals,
real small file systems), then checked for what a careful user would check: the run's final
manifest, its logs, the exit code and one-line error, and that no process outlived the run.

Every process a scenario starts carries a tag in its environment (PROFILECTL_RELIABILITY_TAG,
inherited by the workload and everything it starts), so a process left behind is found by the tag,
whatever it renamed itself to or whichever session it moved to.

bench/reliability.py runs these scenarios and sums the ledger they write
($PROFILECTL_RELIABILITY_LEDGER: one JSON line per scenario: runs made, runs lost, processes left).
Imported as `reliability_support`: two conftest.py files cannot both be imported by that name.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO

PROFILECTL = [sys.executable, str(REPO / "tools" / "profilectl")]
TAG_ENV = "PROFILECTL_RELIABILITY_TAG"
LEDGER_ENV = "PROFILECTL_RELIABILITY_LEDGER"
SETTLE_S = 20.0  # how long leftovers may take to go: the supervisor's grace (15 s) and its kill


def tagged_processes(tag: str) -> dict[int, str]:
    """pid -> command line of every process whose environment carries `tag`."""
    found = {}
    needle = f"{TAG_ENV}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            if needle in environ.split(b"\0"):
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
    return found


def can_mount_tmpfs() -> bool:
    """Root, and the kernel lets this process mount (not a container without CAP_SYS_ADMIN)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(f"/tmp/profilectl-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
        if done.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], capture_output=True)
        return True
    finally:
        probe.rmdir()


CAN_MOUNT = can_mount_tmpfs()
needs_tmpfs = pytest.mark.skipif(not CAN_MOUNT, reason="a small tmpfs needs root with mount rights (CAP_SYS_ADMIN)")


class Harness:
    """Runs profilectl with the scenario's tag; remembers every traces folder it used."""

    def __init__(self, tmp_path: Path, tag: str):
        self.tmp_path = tmp_path
        self.tag = tag
        self.traces_roots: list[Path] = []
        self.planted: set[Path] = set()  # run directories a scenario wrote by hand (broken on purpose)
        self.mounts: list[Path] = []  # unmounted after the runs on them were checked
        self.env = dict(os.environ, **{TAG_ENV: tag, "COLUMNS": "200"})
        for name in ("PROFILECTL_WORKLOAD", "PROFILECTL_TRACES_DIR", "PROFILECTL_HOST_UID", "PROFILECTL_HOST_GID"):
            self.env.pop(name, None)

    def traces(self, root: Path | None = None) -> Path:
        root = root or self.tmp_path / "traces"
        if root not in self.traces_roots:
            self.traces_roots.append(root)
        return root

    def argv(self, *args: str) -> list[str]:
        return [*PROFILECTL, *args]

    def run(self, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env, timeout=timeout,
                              cwd=kwargs.pop("cwd", self.tmp_path), **kwargs)

    def run_with(self, python: str, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        """profilectl started by another interpreter (reliability_support.user_python)."""
        return subprocess.run([python, *self.argv(*args)[1:]], capture_output=True, text=True, env=self.env,
                              timeout=timeout, cwd=kwargs.pop("cwd", self.tmp_path), **kwargs)

    def start(self, *args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, cwd=kwargs.pop("cwd", self.tmp_path), **kwargs)

    def plant(self, traces: Path, name: str, manifest_text: str) -> Path:
        """A run directory written by hand, not by profilectl (not counted as made, or lost)."""
        run = self.traces(traces) / name
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(manifest_text)
        self.planted.add(run)
        return run

    def runs(self) -> list[Path]:
        """The run directories profilectl made in this scenario."""
        return sorted(p for root in self.traces_roots if root.is_dir() for p in root.iterdir()
                      if p.is_dir() and p not in self.planted)


def one_line(stderr: str) -> str:
    """The one line profilectl writes on stderr for a failure (assert there is exactly one)."""
    lines = [line for line in stderr.splitlines() if line.startswith("profilectl")]
    assert len(lines) == 1, stderr
    return lines[0]


def lost_runs(harness: Harness) -> list[str]:
    """Runs a user could not account for: no readable manifest, or `running` for ever (a run whose
    profilectl is gone must read as final or as `abandoned`)."""
    sys.path.insert(0, str(REPO / "src"))
    from profilectl.read.listing import list_runs
    lost = []
    listed = {Path(run.path): run for root in harness.traces_roots if root.is_dir() for run in list_runs(root)}
    for run_dir in harness.runs():
        entry = listed.get(run_dir)
        if entry is None:
            lost.append(f"{run_dir.name}: no manifest")
        elif entry.status in ("unreadable", "running"):
            lost.append(f"{run_dir.name}: {entry.status} {entry.problem or ''}".strip())
    return lost


def settle_and_check(request, harness: Harness) -> None:
    tag = harness.tag
    deadline = time.monotonic() + SETTLE_S
    left = tagged_processes(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = tagged_processes(tag)
    for pid in left:  # never leave them running after the test, whatever it concludes
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    lost = lost_runs(harness)
    ledger = os.environ.get(LEDGER_ENV)
    if ledger:
        with open(ledger, "a") as fh:
            fh.write(json.dumps({"test": request.node.nodeid, "runs": len(harness.runs()), "lost": lost,
                                 "left_behind": sorted(left.values())}) + "\n")
    assert not left, f"processes left behind: {left}"
    assert not lost, f"runs lost: {lost}"


def manifest_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def only_run(root: Path) -> Path:
    runs = [p for p in root.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def wait_for(condition, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def as_user(owner: tuple[int, int], loop) -> int:
    """Fork a real process that becomes the user and runs `loop()` until killed: its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(owner[1], owner[1], owner[1])
            os.setresuid(owner[0], owner[0], owner[0])
            loop()
        finally:
            os._exit(0)
    return pid


def stop(pid: int) -> None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)


def user_python() -> tuple[str, str]:
    """An interpreter another user can run, and the PYTHONPATH that gives it this checkout's packages:
    root's own may live under its 0700 home (pyenv), where profilectl, once it is that user, could not
    start its step supervisor. The system's python3 of the same minor version reads the same
    site-packages (cp3XX extension modules)."""
    import sysconfig
    packages = sysconfig.get_paths()["purelib"]
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.access(candidate, os.X_OK):
            continue
        version = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                 text=True).stdout.strip()
        if version == str(tuple(sys.version_info[:2])):
            return candidate, packages
    pytest.skip(f"no system python3 of version {sys.version_info[0]}.{sys.version_info[1]} for another user to run")


def user_can_run(owner: tuple[int, int], python: str, packages: str, folders: tuple[Path, ...]) -> bool:
    """Whether `owner` can start profilectl with `python` (this checkout's src and `packages`
    readable) and write in `folders`: asked of a forked child that becomes the user."""
    needed = [(python, os.X_OK), (str(REPO / "src" / "profilectl"), os.R_OK | os.X_OK), (packages, os.R_OK | os.X_OK)]
    needed += [(str(folder), os.W_OK | os.X_OK) for folder in folders]
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(owner[1], owner[1], owner[1])
            os.setresuid(owner[0], owner[0], owner[0])
            code = 0 if all(os.access(path, mode) for path, mode in needed) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
