#!/usr/bin/env python3
"""Reliability under faults: runs every scenario of tests/reliability (full disks on a real small
file system, SIGKILL of profilectl, workloads that leave children behind or ignore SIGTERM, bad
files and values, `report -o` over precious files, secrets in --env; and deliberate misuse: a real
user racing symbolic-link swaps against root's hand-back, a root run attacked by that user, a stdout
nobody reads, a second Ctrl-C, a killed step supervisor, a run folder made read-only, `report -o`
at device nodes, secrets in the workload's arguments, `docker kill` and a container OOM kill of the
root counters service; `query` asked to write files, to run for ever or to hold a huge result;
kernel names that are rich markup or terminal escape sequences; secrets in every form and shape; a
workload that kills or stops its supervisor; a wall-clock step; one SLURM rank claimed twice; a
FUSE traces folder that stops answering) and prints what a careful user would count: scenarios
tried and passed, runs lost, processes left behind.

    python3 bench/reliability.py [-k EXPR] [--compose]

A run is lost when profilectl made its directory but a user could not account for it afterwards:
no readable manifest, or `running` for ever (one whose profilectl is gone must read as final, or
as `abandoned`). A process is left behind when it carries a scenario's tag in its environment
(the workload and everything it starts inherit it) after the scenario ended. --compose adds the
compose services' scenarios (tests/integration/test_compose.py: needs Docker; slow).
Exit status: 0 only when nothing failed, nothing was lost and nothing was left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TAG_ENV = "PROFILECTL_RELIABILITY_TAG"
VENV_PYTHON = REPO / ".venv" / "bin" / "python"


def python_with_pytest() -> str:
    for candidate in (sys.executable, str(VENV_PYTHON)):
        if candidate and os.access(candidate, os.X_OK) and subprocess.run(
                [candidate, "-c", "import pytest"], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit("pytest is missing: run tools/install-host-deps (it makes .venv with the test packages)")


def tagged_processes() -> list[str]:
    """Processes still carrying any scenario's tag: left behind."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if any(item.startswith(TAG_ENV.encode() + b"=")
                   for item in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")):
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    left.append(f"{entry} {command}")
        except (OSError, IndexError):
            continue
    return left


def group_of(classname: str) -> str:
    module = classname.rsplit(".", 1)[-1]
    return module.removeprefix("test_").replace("_", "-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", help="only the scenarios pytest's -k selects")
    parser.add_argument("--compose", action="store_true", help="also the compose services' scenarios (Docker)")
    args = parser.parse_args()
    python = python_with_pytest()
    paths = ["tests/reliability"] + (["tests/integration/test_compose.py"] if args.compose else [])
    with tempfile.TemporaryDirectory() as tmp:
        ledger, junit = Path(tmp) / "ledger.jsonl", Path(tmp) / "junit.xml"
        env = dict(os.environ, PROFILECTL_RELIABILITY_LEDGER=str(ledger))
        argv = [python, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
        argv += ["-k", args.select] if args.select else []
        started = time.monotonic()
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if not junit.is_file():
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            raise SystemExit(f"pytest did not run (exit {done.returncode})")
        cases = ET.parse(junit).getroot().iter("testcase")
        entries = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.is_file() else []

    tried: Counter[str] = Counter()
    outcome: dict[str, Counter[str]] = {}
    failures = []
    for case in cases:
        group = group_of(case.get("classname", ""))
        tried[group] += 1
        kinds = {child.tag for child in case}
        result = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcome.setdefault(group, Counter())[result] += 1
        if result == "failed":
            detail = next((child.get("message", "") for child in case if child.tag in ("failure", "error")), "")
            failures.append(f"{case.get('classname')}::{case.get('name')}: {' '.join(detail.split())[:400]}")
    lost = [item for entry in entries for item in entry["lost"]]
    left = [item for entry in entries for item in entry["left_behind"]] + tagged_processes()
    made = sum(entry["runs"] for entry in entries)

    print(f"reliability scenarios ({', '.join(paths)}); root: {os.geteuid() == 0}; {wall:.1f} s")
    print(f"{'group':<20} {'tried':>6} {'passed':>7} {'failed':>7} {'skipped':>8}")
    totals: Counter[str] = Counter()
    for group in sorted(tried):
        counts = outcome[group]
        totals.update(counts)
        print(f"{group:<20} {tried[group]:>6} {counts['passed']:>7} {counts['failed']:>7} {counts['skipped']:>8}")
    print(f"{'total':<20} {sum(tried.values()):>6} {totals['passed']:>7} {totals['failed']:>7} {totals['skipped']:>8}")
    print(f"scenarios tried: {sum(tried.values())}, passed: {totals['passed']}, failed: {totals['failed']}, "
          f"skipped: {totals['skipped']}")
    print(f"runs made: {made}, runs lost: {len(lost)}, processes left behind: {len(left)}")
    for line in failures + [f"lost: {item}" for item in lost] + [f"left behind: {item}" for item in left]:
        print(f"  {line}")
    if totals["skipped"]:
        skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
        for line in skipped[:10]:
            print(f"  {line}")
    return 1 if totals["failed"] or lost or left or not tried else 0


if __name__ == "__main__":
    sys.exit(main())
