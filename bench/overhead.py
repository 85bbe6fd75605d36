#!/usr/bin/env python3
"""Profiler overhead: the same workload bare and under each service's default mode, in one run.

Prints, per mode, the workload's own compute time (the "time=" it reports, which excludes Python
start-up and imports) and the wall time of the profiled process (profiler start-up included,
profilectl's own probe excluded), each as a ratio to bare. Target: timing (profile)
and the lightweight trace within 3 % of bare.

    python3 bench/overhead.py [--size 4096] [--iters 50] [--rounds 5] [--services profile,trace,counters]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = REPO / "profiling" / "workloads" / "matmul.py"
PROFILECTL = [sys.executable, str(REPO / "tools" / "profilectl")]
TIME_RE = re.compile(r"time=([0-9.]+)s")


def bare(workload: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    out = subprocess.run(workload, capture_output=True, text=True, check=True).stdout
    return float(TIME_RE.findall(out)[-1]), time.perf_counter() - started


def under(service: str, workload: list[str], traces: Path) -> tuple[list[float], float, str]:
    extra = ["--repeat", "1", "--warmup", "0"] if service == "profile" else []
    argv = PROFILECTL + [service, "--json", "--traces-dir", str(traces), *extra, "--", *workload]
    done = subprocess.run(argv, capture_output=True, text=True)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise SystemExit(f"{service}: no JSON result: {done.stderr.strip()[-300:]}")
    if result["exit_code"] != 0:
        raise SystemExit(f"{service} failed: {result['message']}")
    log = (Path(result["run_dir"]) / "stdout.log").read_text()
    # The profiled process's own wall time, as the runner measured it (profilectl's probe excluded).
    wall = result["manifest"]["steps"][0]["seconds"]
    return [float(t) for t in TIME_RE.findall(log)], wall, result["manifest"]["backend"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of bare and each mode")
    parser.add_argument("--services", default="profile,trace,counters")
    args = parser.parse_args()
    workload = [sys.executable, str(WORKLOAD), "--size", str(args.size), "--iters", str(args.iters)]
    services = [s for s in args.services.split(",") if s]

    bare(workload)  # warm caches (kernels, libraries) before anything is measured
    compute: dict[str, list[float]] = {"bare": []}
    walls: dict[str, list[float]] = {"bare": []}
    backends: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):  # interleaved, so drift hits every mode alike
            c, w = bare(workload)
            compute["bare"].append(c)
            walls["bare"].append(w)
            for service in services:
                times, wall, backend = under(service, workload, Path(tmp))
                backends[service] = backend
                compute.setdefault(service, []).extend(times[-1:])  # the profiled run's own time
                walls.setdefault(service, []).append(wall)
    base_c, base_w = statistics.median(compute["bare"]), statistics.median(walls["bare"])
    print(f"workload: matmul --size {args.size} --iters {args.iters}; {args.rounds} interleaved rounds; medians")
    print(f"{'mode':<10} {'backend':<10} {'compute s':>10} {'ratio':>7} {'wall s':>8} {'ratio':>7}")
    for mode in ["bare"] + services:
        c, w = statistics.median(compute[mode]), statistics.median(walls[mode])
        print(f"{mode:<10} {backends.get(mode, '-'):<10} {c:>10.4f} {c / base_c:>7.3f} {w:>8.3f} {w / base_w:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
