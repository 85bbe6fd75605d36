"""`compare BASE NEW --fail-if-slower PCT [--metric ...]`: the CI gate, on real tool outputs made
slower by a known amount, and on real `profile` runs of a loop whose steps take known times."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl import errors
from profilectl.report.compare import TIMING_STATS
from support import REPO


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == errors.USAGE, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


# ---------------------------------------------------------------- rocprofv3 kernel traces
def kernel_durations(path: Path) -> list[tuple[str, int]]:
    with path.open(newline="") as fh:
        return [(row["Kernel_Name"], int(row["End_Timestamp"]) - int(row["Start_Timestamp"])) for row in csv.DictReader(fh)]


@pytest.fixture
def rocprofv3_pair(tmp_path, fixtures):
    """BASE: rocprofv3's documented kernel trace; NEW: the same with every divide_kernel dispatch 3x longer."""
    source = fixtures / "rocprofv3-docs/kernel_trace.csv"
    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    new.mkdir()
    (base / "1_kernel_trace.csv").write_bytes(source.read_bytes())
    with source.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        columns = reader.fieldnames
    for row in rows:
        if row["Kernel_Name"].startswith("divide_kernel"):
            start = int(row["Start_Timestamp"])
            row["End_Timestamp"] = str(start + 3 * (int(row["End_Timestamp"]) - start))
    with (new / "1_kernel_trace.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)
    return base, new


def test_gpu_time_gate_fails_past_the_threshold_and_passes_below(rocprofv3_pair):
    base, new = rocprofv3_pair
    before = kernel_durations(base / "1_kernel_trace.csv")
    after = kernel_durations(new / "1_kernel_trace.csv")
    expected = 100.0 * (sum(d for _, d in after) - sum(d for _, d in before)) / sum(d for _, d in before)
    assert 10 < expected < 200  # the fixture's divide kernels carry a real share of the time

    failed = cli("compare", str(base), str(new), "--fail-if-slower", "5", "--format", "json")
    assert failed.returncode == errors.SLOWER == 6, failed.stderr
    gate = json.loads(failed.stdout)["gate"]
    assert gate["metric"] == "gpu-time"  # the default when both runs have kernels
    assert gate["base"] == sum(d for _, d in before) and gate["new"] == sum(d for _, d in after)
    assert gate["unit"] == "ns" and gate["change_percent"] == pytest.approx(expected)
    assert (gate["threshold_percent"], gate["verdict"]) == (5.0, "fail")
    assert failed.stderr.startswith("profilectl: FAIL: total GPU time") and len(failed.stderr.splitlines()) == 1

    passed = cli("compare", str(base), str(new), "--fail-if-slower", f"{expected + 1:.1f}", "--format", "json")
    assert passed.returncode == errors.OK, passed.stderr
    assert json.loads(passed.stdout)["gate"]["verdict"] == "pass"
    faster = cli("compare", str(new), str(base), "--fail-if-slower", "0")  # NEW faster: never a failure
    assert faster.returncode == errors.OK and faster.stdout.startswith("PASS: total GPU time"), faster.stdout


def test_same_run_passes_a_zero_threshold(rocprofv3_pair):
    base, _ = rocprofv3_pair
    done = cli("compare", str(base), str(base), "--fail-if-slower", "0", "--format", "json")
    assert done.returncode == errors.OK and json.loads(done.stdout)["gate"]["change_percent"] == 0.0


def test_markdown_starts_with_the_verdict_then_the_gate_table(rocprofv3_pair):
    base, new = rocprofv3_pair
    done = cli("compare", str(base), str(new), "--fail-if-slower", "5", "--format", "md")
    assert done.returncode == errors.SLOWER
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"\*\*FAIL: total GPU time .+ → .+, \+\d+\.\d % \(threshold \+5 %\)\*\*", lines[0]), lines[0]
    assert lines[2] == "| metric | base | new | change | threshold | verdict |"
    assert lines[4].startswith("| gpu-time |") and lines[4].endswith("| +5 % | fail |")
    assert re.match(r"\| gpu-time \| \d+(\.\d+)? µs \| \d+(\.\d+)? µs \| \+\d+\.\d % \|", lines[4]), lines[4]
    assert "divide_kernel" in done.stdout


def test_kernel_metric_on_the_h200_torch_trace(tmp_path, fixtures):
    """kernel:REGEX: the kernels whose name matches, in a real torch.profiler trace and a copy where
    the GEMM kernels take 25 % longer."""
    trace = json.loads((fixtures / "nvidia-h200/torch_profiler_trace.json").read_text())
    for event in trace["traceEvents"]:
        if event.get("cat") == "kernel" and "gemm" in event["name"]:
            event["dur"] *= 1.25
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(trace))
    base = str(fixtures / "nvidia-h200/torch_profiler_trace.json")
    done = cli("compare", base, str(slower), "--metric", "kernel:xmma_gemm", "--fail-if-slower", "20", "--format", "json")
    assert done.returncode == errors.SLOWER, done.stderr
    gate = json.loads(done.stdout)["gate"]
    assert gate["metric"] == "kernel:xmma_gemm" and gate["change_percent"] == pytest.approx(25.0, abs=0.01)
    assert cli("compare", base, str(slower), "--metric", "kernel:xmma_gemm", "--fail-if-slower", "30").returncode == 0
    missing = one_line_error(cli("compare", base, str(slower), "--metric", "kernel:no_such_kernel", "--fail-if-slower", "5"))
    assert "no kernel matches 'no_such_kernel' in" in missing


@pytest.mark.parametrize("threshold", ["-5", "abc", "nan", "inf", "1e9", "", "5 percent"])
def test_bad_threshold_is_one_line_exit_2_before_any_input_is_read(threshold):
    done = cli("compare", "/does/not/exist-a", "/does/not/exist-b", f"--fail-if-slower={threshold}")
    assert "--fail-if-slower" in one_line_error(done)  # the threshold is judged, not the missing paths


@pytest.mark.parametrize("metric, words", [("kernel:(", "not a regular expression"), ("bogus", "expected gpu-time"),
                                           ("kernel:", "expected gpu-time")])
def test_bad_metric_is_one_line_exit_2(metric, words):
    assert words in one_line_error(cli("compare", "/nope-a", "/nope-b", "--metric", metric))


def test_metrics_a_run_cannot_give_are_usage_errors_naming_the_run(rocprofv3_pair):
    base, new = rocprofv3_pair
    steps = one_line_error(cli("compare", str(base), str(new), "--metric", "step-time", "--fail-if-slower", "5"))
    assert f"step time unavailable in {base}" in steps
    wall = one_line_error(cli("compare", str(base), str(new), "--metric", "wall-time", "--fail-if-slower", "5"))
    assert f"wall time unavailable in {base}" in wall


# ---------------------------------------------------------------- real `profile` runs
LOOP = f"""
import sys, time
sys.path.insert(0, {str(REPO / 'src')!r})
import profilectl
time.sleep(float(sys.argv[2]))  # outside the steps: the wall-time gate sees it whatever the machine's load
for i in range(6):
    time.sleep(float(sys.argv[1]))
    profilectl.step()
"""


@pytest.fixture(scope="module")
def profile_runs(tmp_path_factory):
    """Two real timed runs of a loop: BASE steps of 20 ms, NEW steps of 60 ms and a 1 s set-up, so NEW's
    wall time is longer by far more than the interpreter's start-up varies on a loaded machine."""
    folder = tmp_path_factory.mktemp("gate")
    script = folder / "loop.py"
    script.write_text(LOOP)
    runs = []
    for step_s, setup_s in (("0.02", "0"), ("0.06", "1.0")):
        done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "profile", "--json", "--repeat", "2",
                               "--warmup", "0", "--traces-dir", str(folder / "traces"), "--", sys.executable,
                               str(script), step_s, setup_s], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout)["run_dir"])
    return runs


def test_two_timing_runs_compare_their_timing_statistics(profile_runs):
    base, new = profile_runs
    done = cli("compare", base, new, "--format", "json")
    assert done.returncode == errors.OK, done.stderr
    timing = {row["stat"]: row for row in json.loads(done.stdout)["timing"]}
    assert list(timing) == [*TIMING_STATS, "step median"]
    assert timing["median"]["a_s"] < timing["median"]["b_s"] and timing["median"]["speedup"] < 1
    assert 0.02 <= timing["step median"]["a_s"] < 0.05 and 0.06 <= timing["step median"]["b_s"] < 0.09
    assert timing["std"]["speedup"] is None
    table = cli("compare", base, new)
    assert "0 ns → 0 ns" not in table.stdout and "Timing (2 runs in A, 2 in B)" in table.stdout
    assert re.search(r"step median\s+│\s+\d+(\.\d+)? ms", table.stdout), table.stdout
    md = cli("compare", base, new, "--format", "md").stdout
    assert "## Timing (2 runs in A, 2 in B)" in md and "GPU time" not in md


def test_wall_time_is_the_default_gate_of_timing_runs(profile_runs):
    base, new = profile_runs
    done = cli("compare", base, new, "--fail-if-slower", "10", "--format", "json")
    assert done.returncode == errors.SLOWER, done.stderr
    gate = json.loads(done.stdout)["gate"]
    assert gate["metric"] == "wall-time" and gate["unit"] == "s" and gate["verdict"] == "fail"
    assert "median of 2 vs 2 timed runs" in gate["description"]


def test_step_time_gate(profile_runs):
    base, new = profile_runs
    done = cli("compare", base, new, "--metric", "step-time", "--fail-if-slower", "50", "--format", "json")
    assert done.returncode == errors.SLOWER, done.stderr
    gate = json.loads(done.stdout)["gate"]
    assert gate["change_percent"] > 100  # 60 ms steps against 20 ms ones
    reverse = cli("compare", new, base, "--metric", "step-time", "--fail-if-slower", "0")
    assert reverse.returncode == errors.OK and reverse.stdout.startswith("PASS: steady-state step time")
    measured = cli("compare", base, new, "--metric", "step-time", "--format", "json")  # no threshold: no verdict
    assert measured.returncode == errors.OK and json.loads(measured.stdout)["gate"]["verdict"] == "measured"


def test_the_exit_code_is_documented():
    readme = (REPO / "docs/contracts.md").read_text()  # the exit codes' table, linked from the README
    assert re.search(rf"^\| {errors.SLOWER} \| .*--fail-if-slower", readme, re.M)


def stepped_torch_trace(path: Path, step_us: int, steps: int = 6) -> Path:
    """kineto's layout: a kernel in each of `steps` ProfilerStep ranges (CPU and GPU side) of step_us."""
    base_us = 1_700_000_000_000
    events = []
    for i in range(steps):
        start = base_us + i * step_us
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 42, "tid": 42,
                    "ts": start, "dur": step_us},
                   {"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{i}", "pid": 0, "tid": 7,
                    "ts": start, "dur": step_us},
                   {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": start, "dur": step_us // 2,
                    "args": {"correlation": i + 1, "stream": 7, "device": 0}}]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_step_time_of_traces_comes_from_their_profiler_steps(tmp_path):
    """Steps twice as long in NEW, warm-up included: +100 % whichever steps count as warm-up."""
    base = stepped_torch_trace(tmp_path / "base.json", 1000)
    new = stepped_torch_trace(tmp_path / "new.json", 2000)
    done = cli("compare", str(base), str(new), "--metric", "step-time", "--fail-if-slower", "50", "--format", "json")
    assert done.returncode == errors.SLOWER, done.stderr
    gate = json.loads(done.stdout)["gate"]
    assert (gate["base"], gate["new"]) == (0.001, 0.002) and gate["change_percent"] == pytest.approx(100.0)
    assert "ProfilerStep" in gate["description"]


NSYS_SOLVES = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nsys"


def test_gpu_time_and_the_compare_table_count_copies_and_memsets():
    """Two real Nsight Systems runs of the same solver (tests/fixtures/real/nsys): the summary's GPU
    time is its kernels' plus its copies' and memsets', and compare's table has a row for each copy
    kind beside the kernels, so a change in copies moves the gate (docs/definitions.md)."""
    from profilectl.read.load import load
    la, ca = (NSYS_SOLVES / f"lower-triangular-solves_{v}.sqlite" for v in ("la", "ca"))
    summary = load(la)
    kernels = sum(k.total_ns for k in summary.kernels)
    copies = sum(c.total_ns for c in summary.memory_copies)
    assert copies > 0 and summary.totals.gpu_time_ns == pytest.approx(kernels + copies)
    done = cli("compare", str(la), str(ca), "--format", "json")
    assert done.returncode == 0, done.stderr
    compared = json.loads(done.stdout)
    names = {row["name"] for row in compared["kernels"]}
    assert {c.name for c in summary.memory_copies} <= names, names
    assert compared["totals"]["gpu_time_ns_a"] == pytest.approx(kernels + copies)
