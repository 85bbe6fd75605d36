"""Starts the profiler/workload processes: supervised, tee'd output, timeout, signals.

- Each step runs under a small supervisor (supervisor.py) in a new session: a child subreaper
  that owns the workload's whole process tree. When the step's main process ends, or on timeout or
  Ctrl-C, every descendant gets SIGTERM, then SIGKILL after the grace; when profilectl dies, even
  by SIGKILL, the supervisor's lifeline pipe reaches end of file and it does the same. So nothing
  a step starts outlives the step, and the output pipes close when the step ends (profilectl never
  waits on a pipe a background grandchild still holds).
- SIGINT/SIGTERM/SIGHUP received by profilectl (Ctrl-C, `docker stop`) are passed to the supervisor;
  the caller then records the run as interrupted.
- Output goes to stdout.log / stderr.log as it arrives, unbuffered (a killed run keeps everything
  it had written) and, unless quiet, to the terminal. When the disk fills, the logs keep what fit,
  the pipes are still drained (the workload never blocks on them) and `disk_full` says what failed.
- The terminal echo goes through console.BoundedWriter: a reader that stops reading (a paused pager,
  `| (sleep 600)`) costs dropped echo (counted, and said in the manifest), never a stopped
  supervisor loop: the timeout, Ctrl-C and the final manifest work with stdout blocked.
- A second Ctrl-C (or SIGTERM) while the step is being stopped cuts the grace: SIGKILL now. Both are
  said on stderr as they happen, and in the manifest's notes.
- When the step's supervisor itself is killed, profilectl stops the workload's process group and
  `supervisor_lost` names the cause; no further step runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, BinaryIO, Iterator

from profilectl.backends.base import Step, StepResult
from profilectl.console import BoundedWriter, stream_fd, writer

KILL_GRACE_S = 15.0  # torch.profiler may need seconds to write a large partial trace
SUPERVISOR = Path(__file__).with_name("supervisor.py")
PIPE_DRAIN_S = 5.0  # after the supervisor is gone, how long the pipes may take to reach end of file
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class Interrupted(BaseException):
    """A signal that arrived while no step was running (profilectl was writing tables)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Log:
    """An append-only log written with unbuffered os.write, so what was written is on disk."""

    def __init__(self, path: Path, runner: "Runner"):
        self.path = path
        self.runner = runner
        self.broken = False
        self.written = 0
        try:
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            self.fd = None
            self._failed(exc)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.broken and self.fd is not None:
            try:
                count = os.write(self.fd, view)
            except OSError as exc:
                self._failed(exc)
                return
            self.written += count
            view = view[count:]

    def _failed(self, exc: OSError) -> None:
        self.broken = True  # from now on the stream is drained but not kept
        self.runner.write_failed(self.path, exc)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Pump(threading.Thread):
    """Copies one pipe to a log (and the terminal) until end of file or until told to stop."""

    def __init__(self, source: IO[bytes], log: _Log, echo: BoundedWriter | None):
        super().__init__(daemon=True)
        self.fd = source.fileno()
        self.source = source
        self.log = log
        self.echo = echo
        self.finish = threading.Event()

    def run(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                if self.finish.is_set():
                    return
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.log.write(chunk)
            if self.echo is not None:
                self.echo.offer(chunk)  # never blocks: a reader that stopped reading costs dropped echo


class Runner:
    def __init__(self, run_dir: Path, echo_stdout: BinaryIO | None, echo_stderr: BinaryIO | None,
                 timeout_s: float | None = None, kill_grace_s: float = KILL_GRACE_S, redact: bool = True,
                 quiet: bool = False):
        from profilectl.redaction import redactor
        self.shown = redactor(redact)  # how a step's command line is written (stderr.log, the records)
        self.run_dir = run_dir
        self.echo = (_bounded(echo_stdout), _bounded(echo_stderr))
        self.quiet = quiet  # --quiet: the workload's output goes to the logs only; profilectl's own lines still show
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self.kill_grace_s = kill_grace_s
        self.interrupted: int | None = None  # the signal number received
        self.timed_out = False
        self.disk_full: tuple[Path, OSError] | None = None  # the first log write that found no space
        self.write_error: tuple[Path, OSError] | None = None  # the first log write that failed otherwise
        self.supervisor_lost: str | None = None  # how the step supervisor died before its step ended
        self.notes: list[str] = []  # what the manifest should say about how the steps were stopped
        self._control: int | None = None  # the running step's lifeline to its supervisor
        self._step_label = ""
        self._raise_when_idle = False
        self._in_step = False
        self._previous_handlers: dict[int, Any] = {}

    # --------------------------------------------------------------- signals
    def __enter__(self) -> "Runner":
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
                held = getattr(self._previous_handlers[signum], "received", None)
                if held and not self.interrupted:  # arrived while the run directory was being made
                    self.interrupted = held
            except ValueError:  # not the main thread (tests): no handlers, no forwarding
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        again = self.interrupted is not None
        self.interrupted = self.interrupted or signum
        name = signal.Signals(signum).name
        if self._control is not None:
            if again:  # the user insists: no more grace
                self._tell(b"K")
                self._say(f"{name} again: killing the workload now (SIGKILL), without the rest of the "
                          f"{self.kill_grace_s:g} s grace")
                note = f"a second signal ({name}) cut the {self.kill_grace_s:g} s grace short: the workload was killed"
                if note not in self.notes:
                    self.notes.append(note)
            else:
                self._tell(b"I" if signum == signal.SIGINT else b"T")
                self._say(f"{name}: stopping the workload; it has up to {self.kill_grace_s:g} s to write its "
                          f"files (send it again, e.g. Ctrl-C, to kill it now)")
        elif self._raise_when_idle and not self._in_step:  # never inside run(): its threads use the logs
            raise Interrupted(signum)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """While no step runs, a signal raises Interrupted here instead of only being recorded."""
        self._raise_when_idle = True
        try:
            if self.interrupted:
                raise Interrupted(self.interrupted)
            yield
        finally:
            self._raise_when_idle = False

    def _say(self, message: str) -> None:
        """A line for the user now (stderr, bounded: never blocks, even inside a signal handler)."""
        if self.echo[1] is not None:
            self.echo[1].offer(f"profilectl: {message}\n".encode())

    def echo_dropped(self) -> int:
        return sum(e.dropped for e in set(e for e in self.echo if e is not None))

    def _tell(self, request: bytes) -> None:
        if self._control is not None:
            try:
                os.write(self._control, request)
            except OSError:  # the supervisor is already gone
                pass

    def write_failed(self, path: Path, exc: OSError) -> None:
        if exc.errno in DISK_FULL_ERRNOS:
            if self.disk_full is None:
                self.disk_full = (path, exc)
        elif self.write_error is None:
            self.write_error = (path, exc)

    # --------------------------------------------------------------- running
    def run(self, step: Step, env: dict[str, str], cwd: Path | None = None) -> StepResult:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.timed_out = True
        shown_argv = self.shown.argv(step.argv)  # what is written down: secrets redacted
        if self.interrupted or self.timed_out or self.disk_full or self.supervisor_lost:
            return StepResult(step.label, shown_argv, None, 0.0, step.timed, step.warmup,
                              self.timed_out, bool(self.interrupted))
        full_env = dict(os.environ)
        if "POLARS_CSV_CHUNK_SIZE" in full_env:  # the CSV reader's setting, where a failed read left it
            from profilectl.formats.polars_csv import child_environment
            child_environment(full_env)
        full_env.update(env)
        full_env.update(step.env)  # what differs between the steps of one phase
        self._in_step = True
        out_log, err_log = _Log(self.run_dir / "stdout.log", self), _Log(self.run_dir / "stderr.log", self)
        try:
            err_log.write(f"==> profilectl: {step.label}: {' '.join(shown_argv)}\n".encode())
            returncode, seconds = self._supervise(step, full_env, cwd, out_log, err_log)
        finally:
            out_log.close()
            err_log.close()
            self._in_step = False
        return StepResult(step.label, shown_argv, returncode, seconds, step.timed, step.warmup,
                          timed_out=self.timed_out, interrupted=bool(self.interrupted))

    def _supervise(self, step: Step, env: dict[str, str], cwd: Path | None, out_log: _Log,
                   err_log: _Log) -> tuple[int | None, float]:
        control_r, control_w = os.pipe()
        status_r, status_w = os.pipe()
        argv = [sys.executable or "python3", "-I", "-S", str(SUPERVISOR), str(control_r), str(status_w),
                f"{self.kill_grace_s:g}", step.stop_signal, "--", *step.argv]
        started = time.monotonic()
        try:
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
                                       pass_fds=(control_r, status_w))
        except OSError as exc:
            os.close(control_w)
            os.close(status_r)
            err_log.write(f"profilectl: cannot start {step.argv[0]}: {exc.strerror or exc}\n".encode())
            return 127, 0.0
        finally:
            os.close(control_r)
            os.close(status_w)
        assert process.stdout is not None and process.stderr is not None
        out_echo, err_echo = (None, None) if self.quiet else self.echo
        pumps = [_Pump(process.stdout, out_log, out_echo), _Pump(process.stderr, err_log, err_echo)]
        for pump in pumps:
            pump.start()
        self._control = control_w
        self._step_label = step.label
        try:
            report = self._follow(status_r)
        finally:
            self._control = None
            os.close(control_w)
            os.close(status_r)
            process.wait()
        if report.main_pid and not report.done and report.returncode is None:
            # The supervisor itself was killed: stop the workload's group ourselves.
            with contextlib.suppress(OSError):
                os.killpg(report.main_pid, signal.SIGKILL)
        if not report.done and report.returncode is None and not report.error:
            code = process.returncode
            how = f"killed by {_signal_name(-code)}" if code is not None and code < 0 else f"ended with code {code}"
            self.supervisor_lost = (f"the step supervisor of `{step.label}` (pid {process.pid}) was {how} before "
                                    f"the step ended; profilectl stopped the workload (process group "
                                    f"{report.main_pid or 'not started'})")
        for pump in pumps:
            pump.join(PIPE_DRAIN_S)
        for pump in pumps:
            pump.finish.set()  # something outside the tree still holds a pipe: stop waiting for it
            pump.join()
        process.stdout.close()
        process.stderr.close()
        if report.error:
            err_log.write(f"profilectl: cannot start {step.argv[0]}: {report.error}\n".encode())
            return process.returncode, 0.0
        if report.left:
            names = ", ".join(f"{pid} ({name})" for pid, name in report.left)
            err_log.write(f"==> profilectl: stopped {len(report.left)} process(es) the step left running "
                          f"(SIGTERM, SIGKILL after {self.kill_grace_s:g} s): {names}\n".encode())
        if report.returncode is None and not report.done:
            err_log.write(f"profilectl: the step's supervisor ended with code {process.returncode} "
                          f"before the step did\n".encode())
        seconds = report.seconds if report.seconds is not None else time.monotonic() - started
        return report.returncode, seconds

    def _follow(self, status_fd: int) -> "_Report":
        """Reads the supervisor's status lines until it exits; asks it to stop on timeout."""
        report = _Report()
        pending = b""
        while True:
            timeout = 0.2
            if self.deadline is not None and not self.timed_out:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    self.timed_out = True
                    self._tell(b"T")
                else:
                    timeout = min(timeout, remaining)
            ready, _, _ = select.select([status_fd], [], [], timeout)
            if not ready:
                continue
            chunk = os.read(status_fd, 4096)
            if not chunk:
                return report
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                report.take(line.decode(errors="replace"))


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _bounded(stream: BinaryIO | None) -> BoundedWriter | None:
    """The process-wide bounded writer of the stream's descriptor (None: no echo)."""
    fd = stream_fd(stream) if stream is not None else None
    return writer(fd) if fd is not None else None


class _Report:
    """What the supervisor said about the step."""

    def __init__(self) -> None:
        self.main_pid = 0
        self.returncode: int | None = None
        self.seconds: float | None = None
        self.error: str | None = None
        self.left: list[tuple[int, str]] = []
        self.done = False

    def take(self, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word == "started":
            self.main_pid = int(rest)
        elif word == "exited":
            code, seconds = rest.split()
            self.returncode, self.seconds = int(code), float(seconds)
        elif word == "left":
            pid, _, name = rest.partition(" ")
            self.left.append((int(pid), name))
        elif word == "error":
            self.error = rest.partition(" ")[2] or rest
        elif word == "done":
            self.done = True


def terminal_streams(quiet_stdout: bool) -> tuple[BinaryIO | None, BinaryIO | None]:
    """Where the workload's output is echoed: stderr only when stdout must stay JSON."""
    err = getattr(sys.stderr, "buffer", None)
    out = err if quiet_stdout else getattr(sys.stdout, "buffer", None)
    return out, err
