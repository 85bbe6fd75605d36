"""Starts the profiler/workload processes: own process group, tee'd output, timeout, signals.

- Each step runs in a new session (process group), so a timeout or Ctrl-C stops the profiler and
  every child the workload started, never just the top process.
- SIGINT/SIGTERM received by profilectl (Ctrl-C, `docker stop`) are forwarded to the group; the
  caller then records the run as interrupted.
- Output goes to stdout.log / stderr.log in the run directory as it arrives (so a killed run keeps
  it) and, unless quiet, to the terminal.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from profilectl.backends.base import Step, StepResult

KILL_GRACE_S = 15.0  # torch.profiler may need seconds to write a large partial trace


class Runner:
    def __init__(self, run_dir: Path, echo_stdout: BinaryIO | None, echo_stderr: BinaryIO | None,
                 timeout_s: float | None = None):
        self.run_dir = run_dir
        self.echo = (echo_stdout, echo_stderr)
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self.interrupted: int | None = None  # the signal number received
        self.timed_out = False
        self._current: subprocess.Popen | None = None
        self._previous_handlers: dict[int, Any] = {}

    # --------------------------------------------------------------- signals
    def __enter__(self) -> "Runner":
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread (tests): no handlers, no forwarding
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.interrupted = signum
        self._signal_group(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    def _signal_group(self, signum: int) -> None:
        process = self._current
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    # --------------------------------------------------------------- running
    def run(self, step: Step, env: dict[str, str], cwd: Path | None = None) -> StepResult:
        if self.interrupted or self.timed_out:
            return StepResult(step.label, step.argv, None, 0.0, step.timed, step.warmup,
                              self.timed_out, bool(self.interrupted))
        full_env = dict(os.environ)
        full_env.update(env)
        header = f"==> profilectl: {step.label}: {' '.join(step.argv)}\n".encode()
        with open(self.run_dir / "stdout.log", "ab") as out_log, open(self.run_dir / "stderr.log", "ab") as err_log:
            err_log.write(header)
            err_log.flush()
            started = time.monotonic()
            try:
                process = subprocess.Popen(step.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           stdin=subprocess.DEVNULL, env=full_env, cwd=cwd,
                                           start_new_session=True)
            except OSError as exc:
                message = f"profilectl: cannot start {step.argv[0]}: {exc.strerror or exc}\n".encode()
                err_log.write(message)
                return StepResult(step.label, step.argv, 127, 0.0, step.timed, step.warmup)
            self._current = process
            pumps = [threading.Thread(target=_pump, args=(process.stdout, out_log, self.echo[0]), daemon=True),
                     threading.Thread(target=_pump, args=(process.stderr, err_log, self.echo[1]), daemon=True)]
            for pump in pumps:
                pump.start()
            returncode = self._wait(process)
            elapsed = time.monotonic() - started
            for pump in pumps:
                pump.join(timeout=KILL_GRACE_S)
            self._current = None
        return StepResult(step.label, step.argv, returncode, elapsed, step.timed, step.warmup,
                          timed_out=self.timed_out, interrupted=bool(self.interrupted))

    def _wait(self, process: subprocess.Popen) -> int:
        while True:
            remaining = None if self.deadline is None else self.deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self.timed_out = True
                return self._stop(process)
            try:
                return process.wait(timeout=min(remaining, 0.2) if remaining is not None else 0.2)
            except subprocess.TimeoutExpired:
                if self.interrupted:
                    return self._stop(process, already_signalled=True)

    def _stop(self, process: subprocess.Popen, already_signalled: bool = False) -> int:
        if not already_signalled:
            self._signal_group(signal.SIGTERM)
        try:
            return process.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            return process.wait()


def _pump(source: io.BufferedReader, log: BinaryIO, echo: BinaryIO | None) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):
        log.write(chunk)
        log.flush()
        if echo is not None:
            try:
                echo.write(chunk)
                echo.flush()
            except (OSError, ValueError):
                pass
    source.close()


def terminal_streams(quiet_stdout: bool) -> tuple[BinaryIO | None, BinaryIO | None]:
    """Where the workload's output is echoed: stderr only when stdout must stay JSON."""
    err = getattr(sys.stderr, "buffer", None)
    out = err if quiet_stdout else getattr(sys.stdout, "buffer", None)
    return out, err
