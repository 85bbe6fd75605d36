"""The live view's loop: every second, read on (read/live.py's Monitor), judge (analysis/live.py),
show (report/live.py) and, inside the controller, append one JSON line per update to live.jsonl.

- `--live` (trace, profile): `LiveThread` runs beside the steps in profilectl's own process, a
  daemon thread that writes live.jsonl into the run directory and a plain line on stderr now and
  then (the workload's own output shares the terminal, so no table is redrawn over it). It is
  stopped when the steps end (a last poll then sees the last steps), waited for a bounded time, and
  can neither keep profilectl alive nor cost the run: a failure ends the live view with a note.
- `profilectl watch RUN`: the same loop in the foreground of another terminal (rich Live on a
  terminal, plain lines otherwise), read-only, until the run ends or its profilectl is gone.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from profilectl.analysis.live import LiveState, named_since
from profilectl.read.live import Monitor
from profilectl.report import live as view

LIVE_LOG = "live.jsonl"
POLL_S = 1.0
LINE_EVERY_S = 5.0  # a plain line at most this often, unless the verdict changes (then at once)
STOP_WAIT_S = 5.0  # how long the end of the run waits for the live thread
LIVE_LOG_MAX_BYTES = 100 << 20  # about a day of 8 ranks at one line a second: a bound, as the hook has one


class LiveLog:
    """live.jsonl: one JSON object per update, each appended whole in one write (a write the disk
    could not take whole is cut back); a failure ends the log, never the run."""

    def __init__(self, path: Path):
        self.path = path
        self.failure: str | None = None
        self.lines = 0
        self.size = 0
        try:
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW
                                          | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            self.fd = None
            self.failure = f"{path.name} not written: {exc.strerror or exc}"

    def append(self, record: dict[str, Any]) -> None:
        if self.fd is None:
            return
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if self.size + len(data) > LIVE_LOG_MAX_BYTES:
            self.failure = (f"{self.path.name} stopped at its bound of {LIVE_LOG_MAX_BYTES >> 20} MiB "
                            f"({self.lines} lines)")
            self.close()
            return
        begin = os.lseek(self.fd, 0, os.SEEK_END)
        try:
            if os.write(self.fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
            self.lines += 1
            self.size += len(data)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, begin)
            except OSError:
                pass
            self.failure = f"{self.path.name} stopped after {self.lines} line(s): {exc.strerror or exc}"
            self.close()

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class Follow:
    """One poll after another: the state, whether it changed, and since when its straggler is named."""

    def __init__(self, monitor: Monitor, log: LiveLog | None = None):
        self.monitor = monitor
        self.log = log
        self.last: tuple[Any, ...] | None = None
        self.named: tuple[str, int] | None = None  # (rank, the common step at which it was first named)
        self.first_named: tuple[str, int] | None = None  # the first straggler of the run, and its step
        self.state: LiveState | None = None

    def poll(self) -> tuple[LiveState, bool]:
        """The state now, and whether anything moved since the last poll (a step, a GPU sample)."""
        state = self.monitor.poll()
        straggler = state.straggler
        if straggler is None:
            self.named = None
        elif self.named is None or self.named[0] != straggler.rank:
            # the step the rule named it at (judged step by step), not the poll that saw it
            since = named_since(self.monitor.marks, straggler.rank)
            self.named = (straggler.rank, since if since is not None else state.common_step or 0)
            self.first_named = self.first_named or self.named
        moved = (state.common_step, tuple((r.rank, r.last_step) for r in state.ranks),
                 tuple((g.host, g.gpu, g.at_unix_ns) for g in state.gpus))
        changed = moved != self.last
        self.last, self.state = moved, state
        if changed and self.log is not None:
            self.log.append(self.record(state))
        return state, changed

    @property
    def since(self) -> int | None:
        """The step from which the straggler now named has been named."""
        return self.named[1] if self.named is not None else None

    def record(self, state: LiveState) -> dict[str, Any]:
        record = state.to_dict()
        if record["straggler"] is not None and self.named is not None:
            record["straggler"]["named_since_step"] = self.named[1]
        return record


class Lines:
    """Plain lines: one when the straggler named changes, else at most every `every_s` while the job
    moves."""

    def __init__(self, emit: Callable[[str], None], every_s: float = LINE_EVERY_S):
        self.emit = emit
        self.every_s = every_s
        self.shown_at = 0.0
        self.shown_straggler: str | None = ""  # "" before the first line

    def show(self, state: LiveState, changed: bool, final: bool = False, since: int | None = None) -> None:
        straggler = state.straggler.rank if state.straggler else None
        now = time.monotonic()
        if final or straggler != self.shown_straggler or (changed and now - self.shown_at >= self.every_s):
            self.emit(view.line(state, since))
            self.shown_at, self.shown_straggler = now, straggler


class LiveThread:
    """--live inside the controller (see the module)."""

    def __init__(self, run_dir: Path, emit: Callable[[str], None] | None):
        self.run_dir = run_dir
        self.emit = emit
        self.notes: list[str] = []
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._failure: str | None = None
        self.follow: Follow | None = None
        self.lines = Lines(emit) if emit is not None else None

    @classmethod
    def start(cls, run_dir: Path, emit: Callable[[str], None] | None) -> "LiveThread":
        live = cls(run_dir, emit)
        try:
            live.follow = Follow(Monitor(run_dir), LiveLog(run_dir / LIVE_LOG))
        except Exception as exc:  # noqa: BLE001 - the live view is a convenience: the run goes on
            live.notes.append(f"live view not started: {type(exc).__name__}: {exc}")
            return live
        live._thread = threading.Thread(target=live._run, name="profilectl-live", daemon=True)
        live._thread.start()
        return live

    def _run(self) -> None:
        while not self._halt.wait(POLL_S):
            try:
                self._once()
            except Exception as exc:  # noqa: BLE001 - a bug here costs the live view, not the run
                self._failure = f"live view stopped: {type(exc).__name__}: {exc}"
                return

    def _once(self, final: bool = False) -> None:
        assert self.follow is not None
        state, changed = self.follow.poll()
        if self.lines is not None:
            self.lines.show(state, changed, final, self.follow.since)

    def stop(self) -> list[str]:
        """The steps are over: one last poll (the last steps), the log closed, the notes for the
        manifest. Idempotent."""
        if self._stopped:
            return self.notes
        self._stopped = True
        self._halt.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
            if self._thread.is_alive():
                self._failure = self._failure or f"live view: its thread did not end within {STOP_WAIT_S:g} s"
            elif self._failure is None:
                try:
                    self._once(final=True)
                except Exception as exc:  # noqa: BLE001
                    self._failure = f"live view's last poll failed: {type(exc).__name__}: {exc}"
        follow = self.follow
        if follow is not None and follow.log is not None:
            if not (self._thread is not None and self._thread.is_alive()):
                follow.log.close()
            if follow.log.failure:
                self.notes.append(f"live view: {follow.log.failure}")
        if self._failure:
            self.notes.append(self._failure)
        if follow is not None:
            self.notes.append(_summary_note(follow))
        return self.notes


def _summary_note(follow: Follow) -> str:
    lines = follow.log.lines if follow.log is not None else 0
    if follow.first_named is not None:
        rank, step = follow.first_named
        return (f"live view: rank {rank} was first named the one the others wait for at step {step} "
                f"({lines} update(s) in {LIVE_LOG})")
    return f"live view: no straggler named ({lines} update(s) in {LIVE_LOG})"


def watch(path: Path, out: TextIO, terminal: bool, interval_s: float = POLL_S) -> str:
    """`profilectl watch`: follow the run at `path` until it ends; returns why it ended. Raises
    UsageError for a path that is not a run (before anything is shown); Ctrl-C propagates."""
    follow = Follow(Monitor(path))
    title = f"profilectl watch {path}"
    if terminal:
        from rich.live import Live

        from profilectl.screen import console
        shown = console(file=out, soft_wrap=False)
        with Live(console=shown, auto_refresh=False, transient=False) as screen:
            while True:
                ended = follow.monitor.ended()  # before the poll: the poll after it sees the last steps
                state, _ = follow.poll()
                screen.update(view.table(state, title, follow.since), refresh=True)
                if ended:
                    return ended
                time.sleep(interval_s)

    def emit(text: str) -> None:
        out.write(text + "\n")
        out.flush()
    lines = Lines(emit, every_s=2.0)
    while True:
        ended = follow.monitor.ended()
        state, changed = follow.poll()
        lines.show(state, changed, final=bool(ended), since=follow.since)
        if ended:
            return ended
        time.sleep(interval_s)
