#!/usr/bin/env python3
"""Profiling cost: a training loop bare, under `profile` and under `trace`, in interleaved rounds.

The workload is bench/workloads/transformer_train.py (a GPT-style model, AdamW; CUDA when there is
one), 20 steps by default. Per mode, medians over the rounds, each as a ratio to bare:
- loop: the training loop's own time (the workload's `loop=` line: every step, first to last);
- process: the profiled process's wall time (profilectl's runner; for `profile`, the median run);
- command: the whole profilectl command, start to end (every run, the torch pass, reading, report).
For trace modes also the hook's own costs (profiler start, its step calls including the window's
stop, the final stop, the export), the trace's size and what it holds (GPU kernels, CPU operators,
ProfilerStep ranges: a cheaper window must keep them). A mode that fails is left out of the later
rounds, the others go on. Targets (issue 26): trace loop <= 1.15x,
trace process <= 1.3x; `profile` runs a training job once.

A mode is LABEL=CHECKOUT::ARGS: profilectl from another checkout (a copy of the code before a
change) with its service and options, so one call compares before and after on one machine:

    bench/overhead.py [--rounds 2] [--steps 20] [--mode 'trace before=/tmp/before::trace'] ...
Without --mode: `profile` and `trace` (default options) and `trace --steps all` of this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = REPO / "bench" / "workloads" / "transformer_train.py"
LOOP_RE = re.compile(r"loop=([0-9.]+)s")


def parse_mode(text: str) -> tuple[str, Path, list[str]]:
    label, _, rest = text.partition("=")
    checkout, _, args = rest.partition("::")
    if not label or not args:
        raise SystemExit(f"--mode {text!r}: expected LABEL=CHECKOUT::SERVICE [OPTIONS]")
    return label.strip(), Path(checkout or REPO).resolve(), args.split()


def bare(workload: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    out = subprocess.run(workload, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    return {"loop": float(LOOP_RE.findall(out)[-1]), "process": wall, "command": wall}


def hook_costs(run_dir: Path) -> dict[str, float]:
    """The start-up hook's own costs, summed over the run's status files (profilectl after issue 26)."""
    costs: dict[str, float] = {}
    for path in run_dir.glob("raw/**/rank-*.status.json"):
        for key, value in (json.loads(path.read_text()).get("profiler_costs_s") or {}).items():
            costs[key] = costs.get(key, 0.0) + float(value)
    return costs


def trace_contents(run_dir: Path) -> dict[str, float]:
    """What the traces hold, so a cheaper window is seen to keep it: GPU kernels, CPU operators and
    ProfilerStep ranges, summed over the run's traces."""
    import gzip
    counts = {"kernels": 0.0, "cpu_ops": 0.0, "profiler_steps": 0.0}
    for path in run_dir.glob("raw/**/*.pt.trace.json*"):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc  # torch 1.13: the bare list
        for event in events:
            category, name = event.get("cat"), str(event.get("name", ""))
            counts["kernels"] += category == "kernel"
            counts["cpu_ops"] += category == "cpu_op"
            counts["profiler_steps"] += name.startswith("ProfilerStep#") and category != "gpu_user_annotation"
    return counts


def under(checkout: Path, args: list[str], workload: list[str], traces: Path) -> dict[str, float]:
    service, options = args[0], args[1:]
    argv = [sys.executable, str(checkout / "tools" / "profilectl"), service, "--json", "--traces-dir", str(traces),
            *options, "--", *workload]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    command = time.perf_counter() - started
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise SystemExit(f"{' '.join(args)}: no JSON result: {done.stderr.strip()[-600:]}")
    if result["exit_code"] != 0:
        raise SystemExit(f"{' '.join(args)} failed: {result['message']}")
    run_dir = Path(result["run_dir"])
    loops = [float(t) for t in LOOP_RE.findall((run_dir / "stdout.log").read_text())]
    steps = result["manifest"]["steps"]
    timed = [s["seconds"] for s in steps if not s["label"].startswith("warmup")] or [s["seconds"] for s in steps]
    traces_mb = sum(p.stat().st_size for p in run_dir.glob("raw/**/*.pt.trace.json*")) / 1e6
    return {"loop": statistics.median(loops), "process": statistics.median(timed), "command": command,
            "runs": len(steps), "trace_mb": traces_mb, **trace_contents(run_dir),
            **{f"hook_{k}": v for k, v in hook_costs(run_dir).items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps of the workload (default 20)")
    parser.add_argument("--workload-args", default="", help="more arguments for transformer_train.py, e.g. "
                        "'--layers 4 --width 512' for a smaller model")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of bare and every mode (default 2)")
    parser.add_argument("--mode", action="append", default=[], metavar="LABEL=CHECKOUT::ARGS",
                        help="a profiled mode: label, the checkout whose tools/profilectl runs (empty: this one), "
                             "the service and its options; repeatable")
    parser.add_argument("--json", metavar="FILE", help="also write every measurement to FILE")
    args = parser.parse_args()
    workload = [sys.executable, str(WORKLOAD), "--steps", str(args.steps), *args.workload_args.split()]
    modes = [parse_mode(m) for m in args.mode] or [parse_mode(m) for m in (
        "profile=::profile", "trace=::trace", "trace --steps all=::trace --steps all")]

    bare(workload)  # warm caches (kernels, libraries, the page cache) before anything is measured
    measured: dict[str, list[dict[str, float]]] = {"bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):  # interleaved, so drift hits every mode alike
            measured["bare"].append(bare(workload))
            print(f"round {round_ + 1}: bare {measured['bare'][-1]}", flush=True)
            for label, checkout, service_args in list(modes):
                try:
                    measured.setdefault(label, []).append(under(checkout, service_args, workload, Path(tmp)))
                except SystemExit as failed:  # one failing mode must not cost the others' measurements
                    print(f"round {round_ + 1}: {label} FAILED, left out: {failed}", flush=True)
                    modes.remove((label, checkout, service_args))
                    if not measured[label]:
                        del measured[label]
                    continue
                print(f"round {round_ + 1}: {label} {measured[label][-1]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=1))

    def median(label: str, key: str) -> float:
        values = [m[key] for m in measured[label] if key in m]
        return statistics.median(values) if values else float("nan")
    base = {key: median("bare", key) for key in ("loop", "process", "command")}
    print(f"\nworkload: transformer_train.py --steps {args.steps} {args.workload_args}; {args.rounds} interleaved "
          f"rounds, medians; load average {os.getloadavg()[0]:.2f}")
    print(f"{'mode':<28} {'loop s':>8} {'ratio':>6} {'process s':>10} {'ratio':>6} {'command s':>10} {'ratio':>6} "
          f"{'runs':>5} {'trace MB':>9}  hook: start / steps / stop / export s; trace: kernels / CPU ops / steps")
    for label in measured:
        row = {key: median(label, key) for key in ("loop", "process", "command", "runs", "trace_mb")}
        hook = " / ".join(f"{median(label, 'hook_' + k):.2f}" for k in ("start_s", "steps_s", "stop_s", "export_s"))
        print(f"{label:<28} {row['loop']:>8.3f} {row['loop'] / base['loop']:>6.2f} {row['process']:>10.2f} "
              f"{row['process'] / base['process']:>6.2f} {row['command']:>10.2f} {row['command'] / base['command']:>6.2f} "
              f"{row['runs'] if label != 'bare' else 1:>5.0f} {row['trace_mb']:>9.1f}  "
              f"{hook if 'nan' not in hook else '-'}; "
              f"{' / '.join(f'{median(label, k):.0f}' for k in ('kernels', 'cpu_ops', 'profiler_steps'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
