"""The log keeper: writes a step's stdout.log and stderr.log for profilectl, in a process of its own.

Started by runner.Runner as `python -I -S logkeeper.py STDOUT_LOG STDERR_LOG` (standard library only,
run as a file, like supervisor.py). Why a process: a traces folder that stops answering (a stalled
NFS or FUSE mount) holds a write, and above all the close after it, in the kernel where no signal
reaches. In profilectl's own process that would stall the timeout, Ctrl-C and even profilectl's exit
(a process cannot finish exiting while it flushes a file it holds). Here it stalls only this
process, which profilectl can leave behind, saying so.

- stdin: frames, each one byte for the stream (`O` stdout.log, `E` stderr.log), four bytes of length
  (big-endian) and the data, until end of file. The logs are opened at start (append, created with
  0666 and the umask) and written unbuffered, so a killed run keeps what was written.
- stdout: `error S ERRNO MESSAGE` for a stream's first failure (opening or writing it: a full disk, a
  folder made read-only); from then on that stream's data is read and dropped, so profilectl and the
  workload never wait on it. `done` when both logs are closed.
"""

from __future__ import annotations

import os
import sys

HEADER = 5


class Stream:
    def __init__(self, letter: str, path: str, status: int):
        self.letter = letter
        self.status = status
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            self.failed(exc)

    def failed(self, exc: OSError) -> None:
        say(self.status, f"error {self.letter} {exc.errno or 0} {exc.strerror or exc}")
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = None

    def write(self, data: memoryview) -> None:
        while data and self.fd is not None:
            try:
                count = os.write(self.fd, data)
            except OSError as exc:
                self.failed(exc)
                return
            data = data[count:]

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError as exc:
                self.failed(exc)
            self.fd = None


def say(status: int, line: str) -> None:
    try:
        os.write(status, (line.replace("\n", " ") + "\n").encode(errors="replace"))
    except OSError:  # profilectl is gone: the logs are still written
        pass


def read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def main(args: list[str]) -> int:
    if len(args) != 2:
        sys.stderr.write("usage: logkeeper.py STDOUT_LOG STDERR_LOG\n")
        return 2
    status = sys.stdout.fileno()
    streams = {b"O": Stream("O", args[0], status), b"E": Stream("E", args[1], status)}
    source = sys.stdin.fileno()
    while True:
        header = read_exactly(source, HEADER)
        if len(header) < HEADER:
            break
        data = read_exactly(source, int.from_bytes(header[1:], "big"))
        streams.get(header[:1], streams[b"E"]).write(memoryview(data))
    for stream in streams.values():
        stream.close()
    say(status, "done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
