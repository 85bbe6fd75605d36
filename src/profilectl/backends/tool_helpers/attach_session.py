"""profilectl's attach session: runs `rocprofv3 --attach PID ...` and makes it detach cleanly.

Started as a file with the standard library only (`python -I -S attach_session.py --pid PID
[--duration S] -- ROCPROFV3 ARGV...`). rocprofv3 detaches when its --attach-duration-msec runs
out, or, without one, when Enter arrives on its standard input (rocprofv3.py: "When unset, the
profiler will wait until Enter is pressed to detach"). This session holds that input and presses
Enter when:
- the duration has passed (a second guard beside rocprofv3's own timer),
- it receives SIGINT, SIGTERM or SIGHUP (Ctrl-C, profilectl's --timeout, and profilectl's death:
  the step supervisor stops the tree when its lifeline from profilectl closes),
- the target process has exited;
then it waits for rocprofv3 to finish writing. The target itself is never signalled.
"""

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.2


def main(argv):
    split = argv.index("--")
    own, tool = argv[:split], argv[split + 1:]
    options = dict(zip(own[::2], own[1::2]))
    pid = int(options["--pid"])
    duration = float(options["--duration"]) if "--duration" in options else None
    stop = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: stop.append(s))
    child = subprocess.Popen(tool, stdin=subprocess.PIPE)
    started = time.monotonic()
    detached = None
    while child.poll() is None:
        why = ("signal " + signal.Signals(stop[0]).name if stop else
               "duration" if duration is not None and time.monotonic() - started >= duration else
               "target exited" if not os.path.exists(f"/proc/{pid}") else None)
        if why and detached is None:
            detached = why
            sys.stderr.write(f"profilectl attach: detaching from {pid} ({why})\n")
            sys.stderr.flush()
            try:
                child.stdin.write(b"\n")
                child.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        time.sleep(POLL_S)
    code = child.returncode
    if stop and code is not None and code < 0:
        return 0  # the tool was stopped by the same signal after detaching: the session ended as asked
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
