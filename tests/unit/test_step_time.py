"""`profile` measures the work, not the interpreter: the steady-state time of a Python workload's
steps (profilectl.step() / optimizer.step() marks, noted by the start-up hook in the timed runs)
beside the process wall time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl.read.summary import step_time
from support import REPO

# A loop without torch: set-up, two slow first steps, then steps of 40 ms, marked by profilectl.step().
LOOP = f"""
import sys, time
sys.path.insert(0, {str(REPO / 'src')!r})
import profilectl
time.sleep(0.4)  # set-up the step marks must leave out
for i in range({{steps}}):
    time.sleep(0.25 if i < 3 else 0.04)
    profilectl.step()
"""


def profile(tmp_path: Path, steps: int, *extra: str) -> dict:
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(steps=steps))
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "profile", "--json", "--repeat", "2",
                           "--warmup", "1", "--traces-dir", str(tmp_path / "traces"), *extra, "--", sys.executable,
                           str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_steady_state_step_time_leaves_out_start_up_and_warm_up_steps(tmp_path):
    result = profile(tmp_path, 10)
    steps = result["summary"]["step_time"]
    # 10 marks per run: 9 intervals, the first 2 warm-up (0.25 s), 7 steady ones of 40 ms, 2 timed runs
    assert (steps["runs"], steps["steps"], steps["warmup_steps"]) == (2, 14, 2)
    assert 0.04 <= steps["median_s"] < 0.07, steps  # a sleep lasts at least its time
    assert all(0.25 <= s < 0.3 for s in steps["warmup_s"]), steps
    wall = result["summary"]["timing"]["median_s"]
    assert steps["loop_s"] < wall - 0.4  # the process also paid for the interpreter and the set-up sleep
    run_dir = Path(result["run_dir"])
    # the warm-up run's marks are kept but not measured
    assert len(list((run_dir / "raw/steps").glob("warmup-1/*.status.json"))) == 1
    report = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(run_dir)],
                            capture_output=True, text=True, timeout=60)
    assert "steady-state step: median" in report.stdout and "median wall time" in report.stdout


def test_a_workload_without_step_marks_has_no_step_time(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "profile", "--json", "--repeat", "1",
                           "--warmup", "0", "--traces-dir", str(tmp_path), "--", sys.executable, "-c", "pass"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["summary"]["step_time"] is None


@pytest.mark.parametrize("ends, expected", [
    # one run, ends at 0, 1, 2, 2.5, 3, 3.5 s: intervals 1, 1 (warm-up), then 0.5 x3
    (((0, 10**9, 2 * 10**9, 25 * 10**8, 3 * 10**9, 35 * 10**8),), (3, 2, 0.5, (1.0, 1.0), 3.5)),
    # two marks: one interval, nothing to call warm-up
    (((0, 10**9),), (1, 0, 1.0, (), 1.0)),
])
def test_step_time_arithmetic(ends, expected):
    measured = step_time(ends)
    assert (measured.steps, measured.warmup_steps, measured.median_s, measured.warmup_s, measured.loop_s) == expected


def test_no_marks_no_step_time():
    assert step_time(()) is None and step_time(((5,),)) is None
