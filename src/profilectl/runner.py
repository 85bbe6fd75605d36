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
- When the step's supervisor itself is killed (the workload can: it runs as the same user), or does
  not answer a stop within the grace (a workload that sent it SIGSTOP), profilectl stops the step's
  processes itself and `supervisor_lost` names the cause; no further step runs. profilectl is a
  child subreaper too, so what the supervisor leaves (daemons that called setsid, double-forked)
  is reparented to profilectl, not to init; it finds them by the token every step process carries
  in its environment (STEP_ENV) and by their descent from those.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from secrets import token_hex
from typing import IO, Any, BinaryIO, Iterator

from profilectl import errors
from profilectl import supervisor as step_supervisor
from profilectl.backends.base import Step, StepResult
from profilectl.console import BoundedWriter, stream_fd, writer

KILL_GRACE_S = 15.0  # torch.profiler may need seconds to write a large partial trace
SUPERVISOR_ANSWER_S = 5.0  # after the grace, how long a stop may go unanswered before profilectl stops the step
STEP_ENV = "PROFILECTL_STEP"  # a token in every step process's environment: the tree, without its supervisor
SUPERVISOR = Path(__file__).with_name("supervisor.py")
PIPE_DRAIN_S = 5.0  # after the supervisor is gone, how long the pipes may take to reach end of file
KEEPER = Path(__file__).with_name("logkeeper.py")
OUT, ERR = b"O", b"E"  # the log keeper's names for stdout.log and stderr.log
LOG_QUEUE_FRAMES = 64  # chunks (64 KiB at most) between the pumps and the log keeper
FOLDER_WAIT_ENV = "PROFILECTL_FOLDER_WAIT_S"
FOLDER_WAIT_S = 30.0  # how long the logs may make no progress at a step's end before the folder counts as stalled
FOLDER_WAIT_STOPPING_S = 10.0  # the same, once a timeout or a signal asked the run to stop
SAY_WAIT_S = 2.0  # how long profilectl's own line for stderr.log waits for a log keeper that takes nothing
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class Interrupted(BaseException):
    """A signal that arrived while no step was running (profilectl was writing tables)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Logs:
    """A step's stdout.log and stderr.log, written by the log keeper (logkeeper.py) in a process of
    its own: nothing in profilectl's process holds them, so a traces folder that stops answering
    stalls the keeper, never the timeout, Ctrl-C or profilectl's exit. The pumps hand it their chunks
    and wait when it is behind (the workload's pipes fill, as with a slow disk); the main thread's own
    lines never wait (dropped and counted when the keeper is stuck). A stream the keeper cannot write
    (a full disk, a folder made read-only) is reported to the runner and no longer sent."""

    def __init__(self, run_dir: Path, runner: "Runner"):
        self.paths = {OUT: run_dir / "stdout.log", ERR: run_dir / "stderr.log"}
        self.runner = runner
        self.queue: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue(LOG_QUEUE_FRAMES)
        self.progress = time.monotonic()  # the last moment the keeper took data
        self.dropped = 0
        self.broken: set[bytes] = set()
        self.ended = threading.Event()  # the keeper said `done` (or is gone)
        try:
            self.process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable or "python3", "-I", "-S", str(KEEPER), *map(str, self.paths.values())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:  # no keeper: the logs are not kept, the pipes are still drained
            self.process = None
            for stream, path in self.paths.items():
                self._failed(stream, exc)
            self.ended.set()
            return
        for target in (self._write_loop, self._read_loop):
            threading.Thread(target=target, name=f"logs-{target.__name__}", daemon=True).start()

    def write(self, stream: bytes, data: bytes) -> None:
        """From a pump: waits while the keeper is behind."""
        if stream not in self.broken and self.process is not None:
            self.queue.put((stream, data))

    def say(self, stream: bytes, data: bytes) -> None:
        """From the main thread: waits only while the keeper takes data (a burst of the workload's
        output before it), at most SAY_WAIT_S without progress (a stalled folder: dropped, counted)."""
        while stream not in self.broken and self.process is not None:
            try:
                self.queue.put((stream, data), timeout=0.1)
                return
            except queue.Full:
                if time.monotonic() - self.progress > SAY_WAIT_S:
                    self.dropped += len(data)
                    return

    def close(self, wait_s: float) -> bool:
        """Ask the keeper to finish and wait for it while it keeps taking data (at most `wait_s`
        without progress): True when both logs are written and closed."""
        ending = False
        self.progress = max(self.progress, time.monotonic())  # silence before now (a quiet step) is no stall
        while not self.ended.is_set():
            if not ending:
                try:
                    self.queue.put(None, timeout=0.1)
                    ending = True
                except queue.Full:
                    pass
            else:
                self.ended.wait(0.1)
            if time.monotonic() - self.progress > wait_s:
                return False
        return True

    def _failed(self, stream: bytes, exc: OSError) -> None:
        self.broken.add(stream)
        self.runner.write_failed(self.paths[stream], exc)

    def _write_loop(self) -> None:
        assert self.process is not None and self.process.stdin is not None
        target = self.process.stdin.fileno()
        while True:
            item = self.queue.get()
            if item is None:
                break
            stream, data = item
            if stream in self.broken:
                continue
            frame = memoryview(stream + len(data).to_bytes(4, "big") + data)
            try:
                while frame:
                    frame = frame[os.write(target, frame):]
                    self.progress = time.monotonic()
            except OSError as exc:  # the keeper is gone: what is left cannot be kept
                for name in set(self.paths) - self.broken:
                    self._failed(name, exc)
        self.progress = time.monotonic()
        self.process.stdin.close()

    def _read_loop(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            word, _, rest = raw.decode(errors="replace").strip().partition(" ")
            if word == "error":
                letter, _, rest = rest.partition(" ")
                number, _, message = rest.partition(" ")
                stream = letter.encode()
                if stream in self.paths:
                    self._failed(stream, OSError(int(number) if number.isdigit() else 0, message))
            self.progress = time.monotonic()
        self.process.wait()
        self.ended.set()


class _Pump(threading.Thread):
    """Copies one pipe to a log (and the terminal) until end of file or until told to stop."""

    def __init__(self, source: IO[bytes], logs: _Logs, stream: bytes, echo: BoundedWriter | None):
        super().__init__(daemon=True)
        self.fd = source.fileno()
        self.source = source
        self.logs = logs
        self.stream = stream
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
            self.logs.write(self.stream, chunk)
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
        self._supervisor_pid = 0
        self._stop_asked: tuple[float, bytes] | None = None  # when a stop was asked of the supervisor, and how
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
            if self._stop_asked is None or request == b"K":
                self._stop_asked = (time.monotonic(), request)
            with contextlib.suppress(OSError):  # a supervisor the workload stopped (SIGSTOP) must answer
                os.kill(self._supervisor_pid, signal.SIGCONT)
            try:
                os.write(self._control, request)
            except OSError:  # the supervisor is already gone
                pass

    def _give_up_on_the_folder(self, step: Step, logs: _Logs, waited: float) -> None:
        """The traces folder stopped answering (a stalled network or FUSE mount): the step is over, but
        nothing more can be written there, not even the final manifest, and any further attempt would
        hold profilectl in the kernel, where no signal reaches. So profilectl ends here, with one line
        that says what it leaves behind, and the exit code of what stopped the run."""
        code = errors.TIMEOUT if self.timed_out else errors.INTERRUPTED if self.interrupted else errors.USAGE
        how = ("was stopped by the timeout" if self.timed_out else
               f"was stopped by {signal.Signals(self.interrupted).name}" if self.interrupted else "has ended")
        keeper = f"the log writer (pid {logs.process.pid}, until the folder answers again) and " \
            if logs.process is not None else ""
        line = (f"profilectl: the traces folder {self.run_dir.parent} stopped answering: the logs of `{step.label}` "
                f"took nothing for {waited:g} s (a stalled network or FUSE file system?); the workload {how}; "
                f"left behind: {keeper}{self.run_dir.name} without its final manifest (ls and report show it as "
                f"abandoned)\n")
        from profilectl.screen import visible
        line = visible(line.rstrip("\n")) + "\n"
        if self.echo[1] is not None:
            self.echo[1].offer(line.encode())
            self.echo[1].drain(2.0)
        else:
            with contextlib.suppress(OSError):
                os.write(2, line.encode())
        os._exit(code)  # noqa: SLF001 - no cleanup may touch the folder: it would never return

    def _stop_step_tree(self, token: str, main_pid: int) -> dict[int, str]:
        """SIGKILL to every process of a step whose supervisor is gone: the main process's group, and
        in profilectl's own subtree (it is a subreaper: the daemons the supervisor held came here)
        every process that carries the step's token and everything below those. In rounds, as the
        supervisor does, against a tree that forks while it is stopped. pid -> name of those stopped."""
        if main_pid:
            with contextlib.suppress(OSError):
                os.killpg(main_pid, signal.SIGKILL)
        needle = f"{STEP_ENV}={token}".encode()
        stopped: dict[int, str] = {}
        for _ in range(step_supervisor.KILL_ROUNDS):
            ours = step_supervisor.descendants(os.getpid())
            found: dict[int, str] = {}
            for pid in (p for p in ours if _carries(p, needle)):
                found[pid] = ours[pid]
                found.update(step_supervisor.descendants(pid))
            if not found:
                break
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            stopped.update(found)
            time.sleep(0.01)
            for pid in found:  # those that came to profilectl: reaped here, never left as zombies
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
        return stopped

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
        full_env[STEP_ENV] = token_hex(8)
        self._in_step = True
        logs = _Logs(self.run_dir, self)
        try:
            logs.say(ERR, f"==> profilectl: {step.label}: {' '.join(shown_argv)}\n".encode())
            returncode, seconds = self._supervise(step, full_env, cwd, logs)
        finally:
            asked_to_stop = bool(self.interrupted or self.timed_out)
            waited = min(folder_wait_s(), FOLDER_WAIT_STOPPING_S) if asked_to_stop else folder_wait_s()
            kept = logs.close(waited)
            self._in_step = False
        if not kept:
            self._give_up_on_the_folder(step, logs, waited)
        if logs.dropped:
            self.notes.append(f"stderr.log lacks {logs.dropped} bytes of profilectl's own lines (the log writer "
                              f"took nothing for {SAY_WAIT_S:g} s)")
        return StepResult(step.label, shown_argv, returncode, seconds, step.timed, step.warmup,
                          timed_out=self.timed_out, interrupted=bool(self.interrupted))

    def _supervise(self, step: Step, env: dict[str, str], cwd: Path | None,
                   logs: _Logs) -> tuple[int | None, float]:
        control_r, control_w = os.pipe()
        status_r, status_w = os.pipe()
        argv = [sys.executable or "python3", "-I", "-S", str(SUPERVISOR), str(control_r), str(status_w),
                f"{self.kill_grace_s:g}", step.stop_signal, "--", *step.argv]
        step_supervisor.become_subreaper()  # what the supervisor leaves if it dies comes to profilectl
        started = time.monotonic()
        try:
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
                                       pass_fds=(control_r, status_w))
        except OSError as exc:
            os.close(control_w)
            os.close(status_r)
            logs.say(ERR, f"profilectl: cannot start {step.argv[0]}: {exc.strerror or exc}\n".encode())
            return 127, 0.0
        finally:
            os.close(control_r)
            os.close(status_w)
        assert process.stdout is not None and process.stderr is not None
        out_echo, err_echo = (None, None) if self.quiet else self.echo
        pumps = [_Pump(process.stdout, logs, OUT, out_echo), _Pump(process.stderr, logs, ERR, err_echo)]
        for pump in pumps:
            pump.start()
        self._control = control_w
        self._supervisor_pid = process.pid
        self._stop_asked = None
        self._step_label = step.label
        try:
            report = self._follow(status_r)
        finally:
            self._control = None
            os.close(control_w)
            os.close(status_r)
            process.wait()
        stopped: dict[int, str] = {}
        if not report.done and not report.error:
            # The supervisor was killed (or did not answer, and profilectl killed it): what it would have
            # stopped, profilectl stops now, the daemons it left included (they came to this subreaper).
            stopped = self._stop_step_tree(env[STEP_ENV], report.main_pid)
        if not report.done and report.returncode is None and not report.error:
            code = process.returncode
            how = report.taken_over or (f"was killed by {_signal_name(-code)}" if code is not None and code < 0
                                        else f"ended with code {code}")
            self.supervisor_lost = (f"the step supervisor of `{step.label}` (pid {process.pid}) {how} before "
                                    f"the step ended; profilectl stopped the workload itself "
                                    f"({len(stopped)} process(es))")
        for pump in pumps:
            pump.join(PIPE_DRAIN_S)
        for pump in pumps:
            pump.finish.set()  # something outside the tree still holds a pipe: stop waiting for it
            pump.join(PIPE_DRAIN_S)  # a pump still waiting for the log keeper (a stalled folder) is left
        for pump in pumps:
            if not pump.is_alive():  # never the descriptor a live pump may still read
                pump.source.close()
        if report.error:
            logs.say(ERR, f"profilectl: cannot start {step.argv[0]}: {report.error}\n".encode())
            return process.returncode, 0.0
        if report.left:
            names = ", ".join(f"{pid} ({name})" for pid, name in report.left)
            logs.say(ERR, f"==> profilectl: stopped {len(report.left)} process(es) the step left running "
                          f"(SIGTERM, SIGKILL after {self.kill_grace_s:g} s): {names}\n".encode())
        if report.returncode is None and not report.done:
            logs.say(ERR, f"profilectl: the step's supervisor ended with code {process.returncode} "
                          f"before the step did\n".encode())
        seconds = report.seconds if report.seconds is not None else time.monotonic() - started
        return report.returncode, seconds

    def _follow(self, status_fd: int) -> "_Report":
        """Reads the supervisor's status lines until it exits; asks it to stop on timeout, and kills
        it when it does not answer a stop in time (the step's processes are then stopped by
        profilectl: _stop_step_tree)."""
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
            if self._stop_asked is not None and not report.done and report.taken_over is None:
                asked_at, request = self._stop_asked
                answer_by = asked_at + SUPERVISOR_ANSWER_S + (0.0 if request == b"K" else self.kill_grace_s)
                if time.monotonic() >= answer_by:
                    state = _state(self._supervisor_pid)
                    report.taken_over = (f"did not answer a stop within {answer_by - asked_at:g} s"
                                         + (" (it was stopped: SIGSTOP)" if state == "T" else "")
                                         + ", and profilectl killed it")
                    with contextlib.suppress(OSError):
                        os.kill(self._supervisor_pid, signal.SIGKILL)
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


def folder_wait_s() -> float:
    """$PROFILECTL_FOLDER_WAIT_S, else FOLDER_WAIT_S: seconds without progress before the traces
    folder counts as stalled."""
    from profilectl import settings
    value = settings.get_float_or_default(FOLDER_WAIT_ENV)  # read as a step ends: no error can be said there
    return value if value > 0 else FOLDER_WAIT_S


def _state(pid: int) -> str:
    """A process's state letter (R, S, D, T, Z ...), "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _carries(pid: int, needle: bytes) -> bool:
    """Whether the process's environment holds `needle` (NAME=VALUE) as one entry."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False


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
        self.taken_over: str | None = None  # profilectl killed the supervisor: why

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
