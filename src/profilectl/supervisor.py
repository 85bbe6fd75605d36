"""The step supervisor: the parent of one workload step, so nothing the step starts outlives it.

Started by runner.Runner as `python -I -S supervisor.py CONTROL_FD STATUS_FD GRACE_S [STOP] -- ARGV...`
(standard library only, run as a file: it must start in milliseconds and never import profilectl).

- It becomes a child subreaper (Linux prctl), so every process the workload starts, even one that
  double-forks or calls setsid, stays in its tree instead of escaping to init.
- It starts ARGV in its own process group and reports on STATUS_FD: `started PID`, then
  `exited RC SECONDS` (RC as subprocess gives it: negative for a signal; SECONDS measured from just
  before the spawn to the reaping, without this script's own start-up), then `left PID NAME` for
  every process still running after that, and `done`.
- When the workload's main process ends, every descendant still running is stopped: SIGTERM, then
  SIGKILL after the grace. So the pipes profilectl reads are closed by the time `done` is written.
- CONTROL_FD is the lifeline: profilectl writes `T` (stop: the step's STOP signal, SIGTERM unless
  named, then SIGKILL after the grace) or `I` (interrupt: SIGINT, then SIGKILL after the grace), or
  `K` (kill now: SIGKILL without waiting out the grace, also in the middle of one: a second Ctrl-C);
  end of file means profilectl died (even by SIGKILL), and the tree is stopped the same way as for
  `T`. STOP exists for tools that let go only on one signal (an attach tool detaching on SIGINT).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 200  # SIGKILL passes over the tree: bounds a fork bomb racing the kills


def become_subreaper() -> bool:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: descendants that daemonise can escape
        return False


def process_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, name) for every process in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        name_end = stat.rfind(")")  # the name is in parentheses and may itself contain them
        fields = stat[name_end + 2:].split()
        if len(fields) >= 2:
            table[int(entry)] = (int(fields[1]), fields[0], stat[stat.find("(") + 1:name_end])
    return table


def descendants(root: int) -> dict[int, str]:
    """Live (not zombie) descendants of `root`: pid -> name."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = {}, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        ppid, state, name = table[pid]
        if state != "Z":
            found[pid] = name
        stack.extend(children.get(pid, []))
    return found


class Supervisor:
    def __init__(self, control: int, status: int, grace_s: float, stop_signal: int = signal.SIGTERM):
        self.control: int | None = control
        self.stop_signal = stop_signal  # what `T`, end of file and SIGTERM send first
        self.status = status
        self.grace_s = grace_s
        self.main_pid = 0
        self.main_rc: int | None = None
        self.started = 0.0
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select() through the wakeup fd
        # SIGTERM to the supervisor itself (someone stopping it by pid): stop the tree first.
        signal.signal(signal.SIGTERM, lambda *_: self.stop(self.stop_signal))
        for sig in (signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # its own session: only profilectl tells it to stop

    def say(self, line: str) -> None:
        try:
            os.write(self.status, (line + "\n").encode(errors="replace"))
        except OSError:  # profilectl is gone: nobody to tell, the tree is stopped anyway
            pass

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.main_pid and self.main_rc is None:
                elapsed = time.monotonic() - self.started
                self.main_rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                self.say(f"exited {self.main_rc} {elapsed:.9f}")

    def wait_for_events(self, timeout: float | None) -> bytes | None:
        """Sleep until a child changes state, the control pipe speaks, or the timeout; the control
        bytes read (b'' at end of file), or None when it said nothing."""
        watched = [self.wake_r] + ([self.control] if self.control is not None else [])
        try:
            ready, _, _ = select.select(watched, [], [], timeout)
        except InterruptedError:
            ready = []
        if self.wake_r in ready:
            try:
                while os.read(self.wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        if self.control is not None and self.control in ready:
            try:
                data = os.read(self.control, 64)
            except OSError:
                data = b""
            if not data:
                os.close(self.control)
                self.control = None
            return data
        return None

    def signal_tree(self, signum: int) -> dict[int, str]:
        left = descendants(os.getpid())
        if self.main_rc is None:  # the group exists while its leader does; after, its id may be reused
            try:
                os.killpg(self.main_pid, signum)
            except OSError:
                pass
        for pid in left:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
        return left

    def stop(self, first: int) -> None:
        """`first` to every descendant, then SIGKILL to whatever still runs after the grace."""
        if not self.main_pid:
            return
        self.signal_tree(first)
        deadline = time.monotonic() + (0.0 if first == signal.SIGKILL else self.grace_s)
        while True:
            self.reap()
            if not descendants(os.getpid()):
                return
            if first not in (signal.SIGTERM, self.stop_signal) and self.main_rc is not None:
                # The main process has ended: what it left (background jobs ignore SIGINT) is
                # stopped as at a step's end, within the same grace. Not after the step's own
                # stop signal: what is still running then is finishing what that signal asked.
                first = signal.SIGTERM
                self.signal_tree(first)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            request = self.wait_for_events(min(remaining, 0.05))
            if request and b"K" in request:  # no more grace: the user asked twice
                break
        for _ in range(KILL_ROUNDS):
            if not self.signal_tree(signal.SIGKILL):
                break
            time.sleep(0.01)
            self.reap()
        self.reap()

    def run(self, argv: list[str]) -> int:
        become_subreaper()
        self.started = time.monotonic()
        try:
            # Own process group; every signal this script or Python ignores (SIGINT, SIGHUP, SIGPIPE,
            # SIGXFSZ) back to its default, an empty signal mask: the workload starts as from a shell.
            self.main_pid = os.posix_spawnp(argv[0], argv, os.environ, setpgroup=0, setsigmask=(),
                                            setsigdef=(signal.SIGINT, signal.SIGHUP, signal.SIGPIPE,
                                                       signal.SIGXFSZ, signal.SIGTERM, signal.SIGCHLD))
        except OSError as exc:
            self.say(f"error {exc.errno or 0} {exc.strerror or exc}")
            return 127 if exc.errno == errno.ENOENT else 126
        self.say(f"started {self.main_pid}")
        while self.main_rc is None:
            self.reap()
            if self.main_rc is not None:
                break
            request = self.wait_for_events(None)
            if request is not None:
                self.stop(signal.SIGKILL if b"K" in request else
                          signal.SIGINT if request.endswith(b"I") else self.stop_signal)
        # The step is over: whatever it left running is stopped now, not at profilectl's exit.
        for pid, name in sorted(descendants(os.getpid()).items()):
            self.say(f"left {pid} {name}")
        self.stop(signal.SIGTERM)
        self.say("done")
        return 0


def main(args: list[str]) -> int:
    named = len(args) > 4 and args[3] != "--"  # the optional STOP signal's name
    if len(args) < 5 + named or args[3 + named] != "--" or (named and not hasattr(signal, args[3])):
        sys.stderr.write("usage: supervisor.py CONTROL_FD STATUS_FD GRACE_S [STOP] -- ARGV...\n")
        return 2
    control, status, grace = int(args[0]), int(args[1]), float(args[2])
    stop = getattr(signal, args[3]) if named else signal.SIGTERM
    for fd in (control, status):
        os.set_inheritable(fd, False)  # the workload must not hold the lifeline or the status pipe
    return Supervisor(control, status, grace, stop).run(args[4 + named:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
