#!/usr/bin/env python3
"""profilectl's fixed costs, end to end (interpreter start included), beside the interpreter's own:
`env-check --json`, `report` of a finished run (json and table), `report` of a bare folder already
read once (the summary cache), each warm (its caches filled by a first call) and cold (an empty
cache folder every call), beside `python -c pass` and `python -c 'import rich, yaml'`.
Medians of N interleaved rounds (each round runs every command once, in a shuffled order), so a
shared, loaded machine slows all of them alike; ratios to the `import rich, yaml` floor too.
Targets (issue 26): env-check <= 0.15 s, a finished or cached report <= 0.1 s.

    bench/fixed_costs.py [--runs 21] [--repo CHECKOUT ...]

--repo adds the same commands from other checkouts (e.g. a `git archive` of main) for a
before/after table in one interleaved run. The interpreter is this one when it has rich and PyYAML,
else the checkout's .venv/bin/python.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "nvidia-h200" / "torch_profiler_trace.json"


def interpreter() -> str:
    probe = subprocess.run([sys.executable, "-c", "import rich, yaml"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable
    venv = REPO / ".venv" / "bin" / "python"
    if venv.is_file():
        return str(venv)
    sys.exit("fixed_costs: needs an interpreter with rich and PyYAML (run tools/install-host-deps)")


def timed(argv: list[str], env: dict[str, str], before: "callable[[], None] | None" = None) -> float:  # type: ignore[valid-type]
    if before is not None:
        before()
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"fixed_costs: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-400:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="interleaved rounds (default 21)")
    parser.add_argument("--repo", action="append", default=[], metavar="CHECKOUT",
                        help="also time this checkout's tools/profilectl (label: its folder name)")
    args = parser.parse_args()
    python = interpreter()
    work = Path(tempfile.mkdtemp(prefix="profilectl-fixed-costs-"))
    try:
        return run(args, python, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, python: str, work: Path) -> int:
    env = {**os.environ}
    for name in list(env):
        if name.startswith("PROFILECTL_"):
            del env[name]
    checkouts = [("this", REPO)] + [(Path(r).resolve().name, Path(r).resolve()) for r in args.repo]
    # one finished run and one bare folder, shared by every checkout
    traces, bare = work / "traces", work / "bare"
    bare.mkdir()
    shutil.copy(FIXTURE, bare / FIXTURE.name)
    setup_env = {**env, "PROFILECTL_CACHE_DIR": str(work / "setup-cache")}
    subprocess.run([python, str(REPO / "tools" / "profilectl"), "profile", "--repeat", "2", "--warmup", "0",
                    "--no-sample", "--traces-dir", str(traces), "--", python, "-c", "pass"],
                   check=True, capture_output=True, env=setup_env)
    run_dir = next(p for p in traces.iterdir() if (p / "summary.json").is_file())

    commands: list[tuple[str, list[str], dict[str, str], object]] = [
        ("python -c pass", [python, "-c", "pass"], env, None),
        ("python -c 'import rich, yaml'", [python, "-c", "import rich, yaml"], env, None),
    ]
    for label, checkout in checkouts:
        tool = [python, str(checkout / "tools" / "profilectl")]
        warm = {**env, "PROFILECTL_CACHE_DIR": str(work / f"warm-{label}")}
        cold_dir = work / f"cold-{label}"
        cold = {**env, "PROFILECTL_CACHE_DIR": str(cold_dir)}

        def empty(folder: Path = cold_dir) -> None:
            shutil.rmtree(folder, ignore_errors=True)

        def bare_read_once(folder: Path = cold_dir, tool: list[str] = tool, cold: dict[str, str] = cold) -> None:
            empty(folder)  # the summary cache filled, nothing else
            subprocess.run([*tool, "report", str(bare), "--format", "json"], check=True, capture_output=True, env=cold)

        commands += [
            (f"{label}: env-check --json (warm)", [*tool, "env-check", "--json"], warm, None),
            (f"{label}: env-check --json (cold)", [*tool, "env-check", "--json"], cold, empty),
            (f"{label}: report RUN --format json (warm)", [*tool, "report", str(run_dir), "--format", "json"], warm, None),
            (f"{label}: report RUN (table, warm)", [*tool, "report", str(run_dir)], warm, None),
            (f"{label}: report RUN --format json (cold)", [*tool, "report", str(run_dir), "--format", "json"], cold,
             empty),
            (f"{label}: report BARE --format json (warm)", [*tool, "report", str(bare), "--format", "json"], warm, None),
            (f"{label}: report BARE --format json (summary cached)",
             [*tool, "report", str(bare), "--format", "json"], cold, bare_read_once),
        ]
    for _, argv, cmd_env, _ in commands:  # fill the warm caches (a bare folder's report is kept from its 2nd)
        subprocess.run(argv, capture_output=True, env=cmd_env)
        subprocess.run(argv, capture_output=True, env=cmd_env)
    walls: dict[str, list[float]] = {label: [] for label, *_ in commands}
    order = list(range(len(commands)))
    for _ in range(args.runs):
        random.shuffle(order)
        for index in order:
            label, argv, cmd_env, before = commands[index]
            walls[label].append(timed(argv, cmd_env, before))  # type: ignore[arg-type]
    floor = statistics.median(walls["python -c 'import rich, yaml'"])
    print(f"{args.runs} interleaved rounds, {python}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'command':58} {'median s':>9} {'min s':>7} {'x floor':>8}")
    for label, values in walls.items():
        median = statistics.median(values)
        print(f"{label:58} {median:9.3f} {min(values):7.3f} {median / floor:8.2f}")
    print("floor: python -c 'import rich, yaml'; targets: env-check <= 0.15 s, finished/cached report <= 0.1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
