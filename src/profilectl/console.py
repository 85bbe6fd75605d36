"""Output to the terminal (or whatever reads profilectl's stdout/stderr) that can never stop profilectl.

A reader that stops reading (a paused pager, Ctrl-S in a terminal, `| (sleep 600)`, a slow log
shipper) fills the pipe, and a plain write() then waits for ever: the supervisor loop, the timeout,
Ctrl-C and the final manifest all stop behind it. So every byte profilectl sends to its own stdout or
stderr while a run is under way, and the result it prints after, goes through a `BoundedWriter`:

- `offer(data)` never blocks: the bytes join a bounded buffer (ECHO_BUFFER_BYTES), written by a
  daemon thread; what does not fit is dropped and counted (the logs in the run directory have all of
  it). The thread waits for the reader with select(), so it is never stuck in a write it started on
  a pipe; on a stopped terminal it may be, but it is a daemon thread and nothing waits for it.
- `drain(wait_s)` waits at most `wait_s` (and never past a signal, see `held_signals`) for the
  buffer to empty: the result of a run is printed with a bounded wait, then profilectl exits with
  the code its manifest holds whether or not the reader took it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator

ECHO_BUFFER_BYTES = 1 << 20  # per stream: a terminal that stops reading costs at most this much memory
CHUNK = 4096  # PIPE_BUF: a write this small into a pipe that select() calls writable does not block
OUTPUT_WAIT_ENV = "PROFILECTL_OUTPUT_WAIT_S"
OUTPUT_WAIT_S = 10.0  # how long the result of a finished run waits for a reader that stopped reading
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def output_wait_s() -> float:
    """$PROFILECTL_OUTPUT_WAIT_S (negative: 0), else OUTPUT_WAIT_S; read as a finished run's last output
    goes, where no error can be said: a value that is not a number gives the default."""
    from profilectl import settings
    return max(0.0, settings.get_float_or_default(OUTPUT_WAIT_ENV))


class BoundedWriter:
    """Bytes to one file descriptor through a bounded buffer and a daemon thread (see the module)."""

    def __init__(self, fd: int, limit: int = ECHO_BUFFER_BYTES):
        self.fd = fd
        self.limit = limit
        self.dropped = 0  # bytes offered that did not fit, or came after the reader went away
        self.broken = False  # the reader is gone (EPIPE, a closed descriptor): nothing more is written
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._lock = threading.RLock()  # re-entrant: a signal handler on the main thread may offer too
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None

    def offer(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            if self.broken:
                self.dropped += len(data)
                return
            room = self.limit - self._size
            kept = data if len(data) <= room else data[:max(0, room)]
            self.dropped += len(data) - len(kept)
            if kept:
                self._chunks.append(kept)
                self._size += len(kept)
                self._idle.clear()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._write_loop, name=f"output-fd{self.fd}", daemon=True)
                    self._thread.start()
        self._wake.set()

    def drain(self, wait_s: float, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait at most `wait_s` for everything offered to be written, or until `stop()`; True when written."""
        deadline = time.monotonic() + wait_s
        while not self._idle.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop():
                return False
            self._idle.wait(min(remaining, 0.05))
        return not self.broken

    def _take(self) -> bytes | None:
        with self._lock:
            if not self._chunks:
                self._idle.set()
                return None
            head = self._chunks[0]
            return head[:CHUNK]

    def _written(self, count: int) -> None:
        with self._lock:
            head = self._chunks[0]
            if count >= len(head):
                self._chunks.popleft()
            else:
                self._chunks[0] = head[count:]
            self._size -= count

    def _write_loop(self) -> None:
        while True:
            chunk = self._take()
            if chunk is None:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            try:
                _, writable, _ = select.select([], [self.fd], [], 0.5)
                if not writable:
                    continue
                count = os.write(self.fd, chunk)
            except (OSError, ValueError):
                with self._lock:
                    self.broken = True
                    self.dropped += self._size
                    self._chunks.clear()
                    self._size = 0
                    self._idle.set()
                return
            self._written(count)


_WRITERS: dict[int, BoundedWriter] = {}
_WRITERS_LOCK = threading.Lock()


def writer(fd: int) -> BoundedWriter:
    """The one BoundedWriter of this process for `fd` (1 or 2): its bytes keep their order."""
    with _WRITERS_LOCK:
        if fd not in _WRITERS:
            _WRITERS[fd] = BoundedWriter(fd)
        return _WRITERS[fd]


def stream_fd(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


class HeldSignals:
    """While held, SIGINT/SIGTERM/SIGHUP are recorded instead of ending profilectl (see held_signals)."""

    def __init__(self) -> None:
        self.received: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.received = signum


@contextlib.contextmanager
def held_signals() -> Iterator[HeldSignals]:
    """Record SIGINT/SIGTERM/SIGHUP instead of raising: used around the end of a run (after its
    final manifest) and the printing of its result, so a signal there can only cut the printing
    short, never change the exit code the manifest already holds."""
    held = HeldSignals()
    previous: dict[signal.Signals, Any] = {}
    for signum in HELD_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, held)
        except ValueError:  # not the main thread
            pass
    try:
        yield held
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def deliver(fd: int, text: str, held: HeldSignals | None = None, wait_s: float | None = None) -> bool:
    """`text` to `fd` with a bounded wait: True when the reader took it all."""
    out = writer(fd)
    if fd in (1, 2):
        with contextlib.suppress(Exception):  # whatever Python buffered before goes first, if it can
            stream = sys.stdout if fd == 1 else sys.stderr
            if stream is not None and not _blocked(fd):
                stream.flush()
    out.offer(text.encode(errors="replace"))
    return out.drain(output_wait_s() if wait_s is None else wait_s,
                     stop=(lambda: held.received is not None) if held else (lambda: False))


def _blocked(fd: int) -> bool:
    try:
        _, writable, _ = select.select([], [fd], [], 0)
        return not writable
    except (OSError, ValueError):
        return True
