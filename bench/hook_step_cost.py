#!/usr/bin/env python3
"""What a step mark costs the workload: the start-up hook's on_step (profilectl.step() or
optimizer.step()'s post-hook) with its steps.jsonl line against without (no status folder: the
clock read and the list append only), in a real interpreter that loaded the hook at start-up.

    python3 bench/hook_step_cost.py [--steps N] [--repeat R]

Prints the median ns per step of each and their difference (the line: time_ns, an f-string and one
os.write with O_APPEND).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "src/profilectl/backends/rank_startup"
LOOP = """
import builtins, time
mark = builtins._profilectl_step
n = {steps}
started = time.perf_counter_ns()
for _ in range(n):
    mark()
print((time.perf_counter_ns() - started) / n)
"""


def per_step_ns(steps: int, folder: str | None) -> float:
    env = dict(os.environ, PYTHONPATH=str(HOOK), PROFILECTL_SINGLE="1", PROFILECTL_RANK_ENV="")
    env.pop("PROFILECTL_STATUS_OUT", None)
    env.pop("PROFILECTL_TORCH_OUT", None)
    if folder is not None:
        env["PROFILECTL_STATUS_OUT"] = folder
    done = subprocess.run([sys.executable, "-c", LOOP.format(steps=steps)], env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bare, marked = [], []
    for _ in range(args.repeat):
        bare.append(per_step_ns(args.steps, None))
        with tempfile.TemporaryDirectory(prefix="profilectl-steps-") as folder:
            marked.append(per_step_ns(args.steps, folder))
            lines = sum(1 for p in Path(folder).glob("*.steps.jsonl") for _ in p.open())
            assert lines == args.steps + 1, lines  # who-am-I, then one line per step
    b, m = statistics.median(bare), statistics.median(marked)
    print(f"on_step without steps.jsonl: {b:.0f} ns/step; with: {m:.0f} ns/step; the line costs {m - b:.0f} ns/step "
          f"(median of {args.repeat} x {args.steps} steps, {sys.executable})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
