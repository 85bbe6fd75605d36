"""profilectl's attach session: runs `rocprofv3 --attach PID ...` and makes it detach cleanly.

Started as a file with the standard library only (`python -I -S attach_session.py --pid PID
[--duration S] -- ROCPROFV3 ARGV...`). rocprofv3 detaches when its --attach-duration-msec runs
out, or, without one, when Enter arrives on its standard input (rocprofv3.py: "When unset, the
profiler will wait until Enter is pressed to detach"). This session holds that input and presses
Enter when:
- the duration has passed (a second guard beside rocprofv3's own timer),
- it receives SIGINT, SIGTERM or SIGHUP,
- the target process has exited;
then it waits for rocprofv3 to finish writing. The target itself is never signalled.
profilectl stops this step with SIGINT (Step.stop_signal: on Ctrl-C, --timeout, `docker stop` and
its own death, when the step supervisor's lifeline closes), sent to the whole step: rocprofv3's
attach tool detaches on SIGINT itself (and would die still attached on SIGTERM), and this session
presses Enter as well.
"""

import os
import signal
import subprocess
import sys
import threading
import time

POLL_S = 0.2


def say(text):
    """A line on stderr; nothing when nobody reads it any more (profilectl was killed)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def relay(source):
    """The tool's output, copied to ours until it ends. The tool writes into this pipe, which this
    session holds open: when profilectl dies and its pipes break, the tool's own writes (AMD's
    attach tool prints "Caught signal SIGINT, detaching" before it detaches) do not fail."""
    out = sys.stdout.buffer
    for chunk in iter(lambda: source.read1(65536), b""):
        try:
            out.write(chunk)
            out.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass


def main(argv):
    split = argv.index("--")
    own, tool = argv[:split], argv[split + 1:]
    options = dict(zip(own[::2], own[1::2]))
    pid = int(options["--pid"])
    duration = float(options["--duration"]) if "--duration" in options else None
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a broken stderr must not end the session mid-detach
    stop = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: stop.append(s))
    child = subprocess.Popen(tool, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    copier = threading.Thread(target=relay, args=(child.stdout,), daemon=True)
    copier.start()
    started = time.monotonic()
    detached = None
    while child.poll() is None:
        why = ("signal " + signal.Signals(stop[0]).name if stop else
               "duration" if duration is not None and time.monotonic() - started >= duration else
               "target exited" if not os.path.exists(f"/proc/{pid}") else None)
        if why and detached is None:
            detached = why
            say(f"profilectl attach: detaching from {pid} ({why})\n")
            try:
                child.stdin.write(b"\n")
                child.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        time.sleep(POLL_S)
    if stop and detached is None:  # the tool detached on the signal itself before this loop saw it
        say(f"profilectl attach: detaching from {pid} (signal {signal.Signals(stop[0]).name})\n")
    copier.join(5)
    code = child.returncode
    if stop and code is not None and code < 0:
        return 0  # the tool was stopped by the same signal after detaching: the session ended as asked
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
