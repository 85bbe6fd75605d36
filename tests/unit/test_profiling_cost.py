"""What profiling costs (issue 26): `profile` sizes its repeats to the workload and stops at the first
failure; the torch pass runs only when cheap or asked; torch.profiler's options as the plan shows
them, and the trace's bounded window in a real (CPU) torch run. Real processes throughout."""

import json
import sys
from pathlib import Path

import pytest

from cli_support import json_run
from test_launchers import SYSTEM_PYTHON, needs_torch

BUDGET = {"PROFILECTL_REPEAT_BUDGET_S": "2"}  # sized repeats: about 2 s of runs, a first run over 0.67 s runs once


def sleeper(tmp_path: Path, seconds: float, exit_code: int = 0) -> list[str]:
    """A workload that sleeps and counts its runs in a file."""
    script = tmp_path / "sleeper.py"
    script.write_text(f"import sys, time\nopen({str(tmp_path / 'runs.txt')!r}, 'a').write('x')\n"
                      f"time.sleep({seconds})\nsys.exit({exit_code})\n")
    return [sys.executable, str(script)]


def labels(result: dict) -> list[str]:
    return [s["label"] for s in result["manifest"]["steps"]]


def test_a_short_program_runs_many_times_sized_to_the_budget(machine, tmp_path):
    result, run = json_run(machine, "profile", "--", *sleeper(tmp_path, 0.05), extra_env=BUDGET)
    assert result["status"] == "ok", result["message"]
    steps = result["manifest"]["steps"]
    first = steps[0]["seconds"]
    timed = [s for s in steps if s["label"].startswith("run ")]
    # the warm-up sized it: budget / first run, at least 3, at most 30
    assert steps[0]["label"].startswith("warmup 1/1")
    assert len(timed) == max(3, min(30, int(2 // first))) and len(timed) >= 3
    assert (tmp_path / "runs.txt").read_text() == "x" * len(steps)
    assert result["summary"]["timing"]["runs"] == len(timed)
    assert any(f"{len(timed)} timed run(s): the first run took" in n for n in result["manifest"]["notes"])


def test_a_long_program_runs_once_and_that_run_is_the_measurement(machine, tmp_path):
    result, run = json_run(machine, "profile", "--", *sleeper(tmp_path, 0.9), extra_env=BUDGET)
    assert result["status"] == "ok", result["message"]
    assert labels(result) == ["run 1/1 (the first run; no warm-up)"]
    assert (tmp_path / "runs.txt").read_text() == "x"
    assert result["summary"]["timing"]["runs"] == 1 and result["summary"]["timing"]["median_s"] >= 0.9
    assert any(n.startswith("one run: the first took") for n in result["manifest"]["notes"])


def test_an_explicit_repeat_is_honoured(machine, tmp_path):
    result, run = json_run(machine, "profile", "--repeat", "2", "--warmup", "0", "--", *sleeper(tmp_path, 0.9),
                           extra_env=BUDGET)
    assert result["status"] == "ok", result["message"]
    assert labels(result) == ["run 1/2", "run 2/2"]
    assert (tmp_path / "runs.txt").read_text() == "xx"


def test_no_warmup_with_sized_repeats_counts_the_first_run(machine, tmp_path):
    result, run = json_run(machine, "profile", "--warmup", "0", "--", *sleeper(tmp_path, 0.05), extra_env=BUDGET)
    assert result["status"] == "ok", result["message"]
    assert labels(result)[0] == "run 1 (also sizes the repeats)" and len(labels(result)) >= 3
    assert result["summary"]["timing"]["runs"] == len(labels(result))


def test_a_failing_workload_with_sized_repeats_runs_once(machine, tmp_path):
    result, run = json_run(machine, "profile", "--", *sleeper(tmp_path, 0.01, exit_code=3), extra_env=BUDGET)
    assert result["exit_code"] == 1 and result["status"] == "failed"
    assert (tmp_path / "runs.txt").read_text() == "x"
    assert [s["exit_code"] for s in result["manifest"]["steps"]] == [3]


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_a_bad_repeat_is_a_usage_error(machine, tmp_path, value):
    result = __import__("cli_support").cli(machine, "profile", "--repeat", value, "--", *sleeper(tmp_path, 0))
    assert result.returncode == 2 and "--repeat" in result.stderr and "Traceback" not in result.stderr


def test_the_plan_says_how_repeats_are_sized(machine, tmp_path):
    result = __import__("cli_support").cli(machine, "profile", "--dry-run", "--", *sleeper(tmp_path, 0), extra_env=BUDGET)
    assert result.returncode == 0, result.stderr
    assert "repeats sized to the workload" in result.stdout and "about 2 s" in result.stdout


# ------------------------------------------------------------------ torch.profiler's options
def torch_options(plan: dict) -> dict:
    return json.loads(plan["phases"][0]["environment"]["PROFILECTL_TORCH_OPTIONS"])


@pytest.mark.parametrize("steps, first_steps", [((), 5), (("--steps", "all"), None), (("--steps", "2:4"), None)])
def test_trace_plan_shows_torch_profiler_options(machine, steps, first_steps):
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")
    done = __import__("cli_support").cli(machine, "trace", "--dry-run", "--json", "--backend", "torch", *steps,
                                         "--", "python3", "train.py")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    options = torch_options(plan)
    assert options == {"record_shapes": False, "with_stack": False, "profile_memory": False, "with_flops": False,
                       "with_modules": False, "acc_events": False, "first_steps": first_steps,
                       "window_close": "pause"}
    window_note = any("records the start-up and the first 5 steps" in n for n in plan["notes"])
    assert window_note == (first_steps is not None)


def test_bad_steps_words_are_usage_errors(machine):
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")
    done = __import__("cli_support").cli(machine, "trace", "--dry-run", "--steps", "every", "--", "python3", "t.py")
    assert done.returncode == 2 and "A:B" in done.stderr and "all" in done.stderr


def test_profile_plans_the_torch_pass_only_when_cheap(machine):
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")
    cli = __import__("cli_support").cli
    plan = json.loads(cli(machine, "profile", "--dry-run", "--json", "--", "python3", "t.py").stdout)
    assert [p["backend"] for p in plan["phases"]] == ["timing", "torch"] and plan["phases"][1]["when"] == "cheap"
    plan = json.loads(cli(machine, "profile", "--dry-run", "--json", "--torch-pass", "always", "--", "python3",
                          "t.py").stdout)
    assert plan["phases"][1]["when"] == "always"
    plan = json.loads(cli(machine, "profile", "--dry-run", "--json", "--torch-pass", "never", "--", "python3",
                          "t.py").stdout)
    assert [p["backend"] for p in plan["phases"]] == ["timing"]


# ------------------------------------------------------------------ real torch (Debian's, CPU)
TRAIN = """
import torch
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range({steps}):
    loss = model(torch.randn(8, 16)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"""


def train_script(tmp_path: Path, steps: int) -> list[str]:
    script = tmp_path / "train.py"
    script.write_text(TRAIN.format(steps=steps))
    return [SYSTEM_PYTHON, str(script)]


def trace_events(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    return doc["traceEvents"] if isinstance(doc, dict) else doc  # torch 1.13 writes the bare list


def profiler_steps(run: Path) -> tuple[set[str], dict]:
    traces = sorted((run / "raw").glob("*.pt.trace.json"))
    assert len(traces) == 1, traces
    events = trace_events(traces[0])
    marks = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    optimizer = sum(1 for e in events if str(e.get("name", "")).startswith("Optimizer.step#SGD.step"))
    status = json.loads(next((run / "raw").glob("rank-*.status.json")).read_text())
    return marks, {"optimizer_steps": optimizer, **status}


@needs_torch
def test_trace_records_the_first_steps_then_runs_unprofiled(machine, tmp_path):
    result, run = json_run(machine, "trace", "--backend", "torch", "--", *train_script(tmp_path, 8), timeout=300)
    assert result["status"] == "ok", result["message"]
    marks, status = profiler_steps(run)
    assert status["optimizer_steps"] == 5 and status["steps"] == 8  # 8 steps ran, the first 5 recorded
    # torch 1.13 labels a step one lower than 2.x and leaves the window's first mark out: #0-#3 or #0-#4
    assert len(marks) in (4, 5) and "ProfilerStep#5" not in marks and "ProfilerStep#6" not in marks
    costs = status["profiler_costs_s"]
    assert set(costs) == {"start_s", "steps_s", "stop_s", "export_s"} and costs["export_s"] > 0


@needs_torch
@pytest.mark.parametrize("close", ["pause", "pause-cpu", "stop"])
def test_each_way_of_closing_the_window_records_the_same_steps(machine, tmp_path, close):
    # pause needs torch >= 2.4 (toggle_collection_dynamic): older torch falls back to the stop
    options = json.dumps({"first_steps": 5, "window_close": close}, separators=(",", ":"))
    result, run = json_run(machine, "trace", "--backend", "torch", "--env", f"PROFILECTL_TORCH_OPTIONS={options}",
                           "--", *train_script(tmp_path, 8), timeout=300)
    assert result["status"] == "ok", result["message"]
    marks, status = profiler_steps(run)
    assert status["optimizer_steps"] == 5 and status["steps"] == 8
    assert len(marks) in (4, 5) and "ProfilerStep#5" not in marks and "ProfilerStep#6" not in marks


@needs_torch
def test_trace_steps_all_records_every_step(machine, tmp_path):
    result, run = json_run(machine, "trace", "--backend", "torch", "--steps", "all", "--",
                           *train_script(tmp_path, 8), timeout=300)
    assert result["status"] == "ok", result["message"]
    marks, status = profiler_steps(run)
    assert status["optimizer_steps"] == 8 and len(marks) >= 8


@needs_torch
def test_a_workload_that_never_steps_is_recorded_to_its_end(machine, tmp_path):
    script = tmp_path / "nostep.py"
    script.write_text("import torch\nfor _ in range(7):\n    torch.mm(torch.randn(32, 32), torch.randn(32, 32))\n")
    result, run = json_run(machine, "trace", "--backend", "torch", "--", SYSTEM_PYTHON, str(script), timeout=300)
    assert result["status"] == "ok", result["message"]
    events = trace_events(next((run / "raw").glob("*.pt.trace.json")))
    assert sum(1 for e in events if e.get("name") == "aten::mm") == 7


@needs_torch
def test_profile_of_a_long_torch_job_leaves_the_torch_pass_out_unless_asked(machine, tmp_path):
    workload = train_script(tmp_path, 3)
    budget = {"PROFILECTL_REPEAT_BUDGET_S": "0.3"}  # torch's import alone makes this job "long"
    result, run = json_run(machine, "profile", "--", *workload, extra_env=budget, timeout=300)
    assert result["status"] == "ok", result["message"]
    assert labels(result) == ["run 1/1 (the first run; no warm-up)"]
    assert any(n.startswith("no torch pass: one more run") for n in result["manifest"]["notes"])
    # the one run's step marks moved to the timed run's folder: its steps are read as the run's
    assert (run / "raw/steps/run-1").is_dir() and not (run / "raw/steps/warmup-1").exists()
    assert result["summary"]["step_time"]["runs"] == 1
    result, run = json_run(machine, "profile", "--torch-pass", "always", "--", *workload, extra_env=budget,
                           timeout=300)
    assert result["status"] == "ok", result["message"]
    assert len(labels(result)) == 2 and list((run / "raw" / "torch").glob("*.pt.trace.json"))


def test_a_slurm_task_runs_once_so_every_rank_runs_the_same_count(machine, tmp_path):
    """Each task of a SLURM job step runs its own profilectl: counts sized apart could differ between
    ranks and leave one waiting in a collective, so a task without --repeat runs the workload once."""
    from test_jobs import task_env
    env = {**{k: v for k, v in task_env(0, 1).items() if k.startswith("SLURM")}, **BUDGET}
    result, run = json_run(machine, "profile", "--", *sleeper(tmp_path, 0.05), extra_env=env)
    assert result["status"] == "ok", result["message"]
    assert labels(result) == ["run 1/1"] and (tmp_path / "runs.txt").read_text() == "x"
    assert any("in a SLURM job step every rank" in n for n in result["manifest"]["notes"])


@pytest.mark.parametrize("first_s, runs", [(0.001, 30), (0.1, 30), (0.5, 20), (1.0, 10), (3.0, 3), (3.3, 3),
                                           (3.4, 0), (14.4, 0)])
def test_repeat_sizing_like_a_benchmarking_tool(first_s, runs, monkeypatch):
    """Many runs for a short program, one for a training job (0: the first run is the measurement)."""
    monkeypatch.delenv("PROFILECTL_REPEAT_BUDGET_S", raising=False)
    from profilectl.backends.timing import repeat_sizing
    assert repeat_sizing().runs(first_s) == runs
