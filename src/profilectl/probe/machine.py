"""The machine the probe looks at: a root directory, a PATH and an environment.

Tests build fake machines in a temp dir (sysfs/proc files, executables that print what the real
tools print); production uses "/" and the process environment. Every external command runs with a
short timeout, so a hanging tool can never hang env-check.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

DEFAULT_TIMEOUT_S = 3.0
T = TypeVar("T")


def in_background(work: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start work(*args) on a thread; the returned call waits for its value (or raises its error).
    A thread, not concurrent.futures: that import (with logging) is a tenth of env-check's start-up."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work(*args)
        except BaseException as exc:  # handed to the caller, as Future.result() would
            box["error"] = exc

    thread = threading.Thread(target=target, name="profilectl-probe", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if "error" in box:
            raise box["error"]
        value: T = box["value"]
        return value
    return result


@dataclass
class CommandResult:
    """One command the probe ran: its argv, exit code and output, and whether it timed out or could not start."""
    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # could not start at all (missing, not executable)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.error is None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Machine:
    """The machine the probe looks at: its root folder, PATH and environment, the commands' timeout, and whether
    answers may come from the cache."""
    root: Path = Path("/")
    path: str = field(default_factory=lambda: os.environ.get("PATH", os.defpath))
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = DEFAULT_TIMEOUT_S
    # answers that only change when files change (a tool's version, the workload Python's torch) may
    # come from the cache (probe/facts_cache.py): env-check's, not a run's, which probes afresh
    remember: bool = False

    def file(self, absolute: str) -> Path:
        """Where an absolute path of the probed machine lives on this one."""
        return self.root / absolute.lstrip("/")

    def read(self, absolute: str | Path) -> str | None:
        try:
            return self.file(str(absolute)).read_text(errors="replace")
        except OSError:
            return None

    def exists(self, absolute: str) -> bool:
        return self.file(absolute).exists()

    def glob(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern.lstrip("/")))

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.path)

    def run(self, argv: list[str], timeout_s: float | None = None,
            extra_env: Mapping[str, str] | None = None) -> CommandResult:
        import subprocess  # here: a probe whose answers all come from files or the cache starts nothing
        env = dict(self.env)
        env["PATH"] = self.path
        if extra_env:
            env.update(extra_env)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  timeout=timeout_s or self.timeout_s, env=env,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(argv, None, _text(exc.stdout), _text(exc.stderr), timed_out=True)
        except OSError as exc:
            return CommandResult(argv, None, error=exc.strerror or str(exc))
        return CommandResult(argv, done.returncode, done.stdout, done.stderr)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")
