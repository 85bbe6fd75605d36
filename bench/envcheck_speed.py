#!/usr/bin/env python3
"""Wall time of `profilectl env-check --json`, end to end (interpreter start included). Target < 1 s.

    python3 bench/envcheck_speed.py [--runs 10]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    argv = [sys.executable, str(REPO / "tools" / "profilectl"), "env-check", "--json"]
    walls = []
    for _ in range(args.runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
    print(f"env-check --json: {args.runs} runs, median {statistics.median(walls):.3f} s, "
          f"min {min(walls):.3f} s, max {max(walls):.3f} s (target < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
