"""Runs a Python script or module under torch.profiler and exports a Chrome trace.

usage: python torch_wrapper.py --out TRACE.json -- script.py [args] | -m module [args] | -c code
Standalone on purpose: it runs in the workload's interpreter, where profilectl may not be installed.
"""

import argparse
import runpy
import signal
import sys


def _exit_on_signal(signum: int, frame: object) -> None:
    # A timeout or Ctrl-C sends SIGTERM/SIGINT to the whole process group: unwind through the
    # profiler's `with` block so the partial trace is still exported.
    raise SystemExit(128 + signum)


def main() -> int:
    # Before anything slow (importing torch takes seconds): a signal must always unwind, never kill.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_on_signal)
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("target", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    if not target:
        print("torch_wrapper: no script to run", file=sys.stderr)
        return 2

    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():  # ROCm builds report their GPUs through the CUDA API too
        activities.append(ProfilerActivity.CUDA)
    code = 0
    with profile(activities=activities, record_shapes=False) as prof:
        try:
            if target[0] == "-m":
                sys.argv = target[1:]
                runpy.run_module(target[1], run_name="__main__", alter_sys=True)
            elif target[0] == "-c":
                sys.argv = ["-c"] + target[2:]
                exec(compile(target[1], "<string>", "exec"), {"__name__": "__main__"})
            else:
                sys.argv = target
                runpy.run_path(target[0], run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    prof.export_chrome_trace(args.out)
    return code


if __name__ == "__main__":
    sys.exit(main())
