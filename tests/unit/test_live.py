"""The job while it runs (issue 37): the start-up hook's steps.jsonl written as each step ends, by a
real interpreter; `profile --live` / `trace --live` naming a sleeping rank of a real 2-rank job in
live.jsonl as it goes; `profilectl watch` following a run another process writes, read-only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import cli
from support import REPO

HOOK = REPO / "src/profilectl/backends/rank_startup"
RANKS = [sys.executable, str(REPO / "tests/workloads/live_ranks.py")]
PROFILECTL = [sys.executable, str(REPO / "tools/profilectl")]
# the loop marks three steps, says so and waits for a line on stdin, then marks two more
LOOP = """
import builtins, sys
for _ in range(3):
    builtins._profilectl_step()
print("three", flush=True)
sys.stdin.readline()
for _ in range(2):
    builtins._profilectl_step()
print("done", flush=True)
"""


def hook_env(status_dir: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILECTL_")}
    env.update(PYTHONPATH=str(HOOK), PROFILECTL_RANK_ENV="RANK", RANK="3", PROFILECTL_STATUS_OUT=str(status_dir), **more)
    return env


def test_the_hook_appends_each_step_as_it_ends(tmp_path):
    env = hook_env(tmp_path, PROFILECTL_LOCAL_RANK_ENV="LOCAL_RANK", LOCAL_RANK="1", CUDA_VISIBLE_DEVICES="4,5")
    rank = subprocess.Popen([sys.executable, "-c", LOOP], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert rank.stdout is not None and rank.stdout.readline() == "three\n"
        (steps,) = tmp_path.glob("rank-3-*.steps.jsonl")
        while_running = [json.loads(line) for line in steps.read_text().splitlines()]  # the rank still runs
        assert [d.get("step") for d in while_running] == [None, 1, 2, 3]
        rank.communicate("\n", timeout=30)
    finally:
        rank.kill()
    assert rank.returncode == 0
    head, *marks = [json.loads(line) for line in steps.read_text().splitlines()]
    assert head == {"rank": "3", "host": head["host"], "pid": rank.pid, "local_rank": 1, "visible_devices": "4,5"}
    assert steps.name == f"rank-3-{head['host']}-{rank.pid}.steps.jsonl"
    assert [m["step"] for m in marks] == [1, 2, 3, 4, 5]
    status = json.loads(steps.with_name(steps.name.replace(".steps.jsonl", ".status.json")).read_text())
    assert [m["end_mono_ns"] for m in marks] == status["step_ends_ns"]  # one clock read, both files
    assert all(b["end_unix_ns"] > a["end_unix_ns"] for a, b in zip(marks, marks[1:]))
    from profilectl.read.live import StepsFile
    read = StepsFile(steps, "3", head["host"], rank.pid)
    read.poll()
    assert read.gpu == 5 and [m.step for m in read.marks] == [1, 2, 3, 4, 5]  # the LOCAL_RANK-th visible GPU


def test_a_steps_file_the_disk_cannot_take_costs_the_workload_nothing(tmp_path):
    import resource

    def small_files() -> None:  # every file at most 250 bytes: a line that crosses it is taken in part
        resource.setrlimit(resource.RLIMIT_FSIZE, (250, 250))
    done = subprocess.run([sys.executable, "-c", LOOP], env=hook_env(tmp_path), input="\n", capture_output=True,
                          text=True, timeout=30, preexec_fn=small_files)
    assert done.returncode == 0 and done.stdout == "three\ndone\n" and done.stderr == ""
    (steps,) = tmp_path.glob("rank-3-*.steps.jsonl")
    *lines, rest = steps.read_bytes().split(b"\n")
    assert rest == b""  # whole lines only: the one cut short was cut back, and the file ended there
    head, *marks = [json.loads(line).get("step") for line in lines]
    assert head is None and 1 <= len(marks) < 5 and marks == list(range(1, len(marks) + 1))
    assert steps.stat().st_size <= 250


def live_lines(run_dir: Path) -> list[dict]:
    lines = (run_dir / "live.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]  # every line whole


def profile_live(tmp_path: Path, *workload: str) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run([*PROFILECTL, "profile", "--live", "--json", "--repeat", "1", "--warmup", "0",
                           "--traces-dir", str(tmp_path), "--", *RANKS, *workload], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done


def test_profile_live_names_the_sleeping_rank_within_a_few_steps_of_its_first_late_one(tmp_path):
    # rank 1 sleeps 50 ms after the barrier from its 9th step (from 0: 8) on
    result, done = profile_live(tmp_path, "--steps", "24", "--sleep-rank", "1", "--sleep-from", "8")
    run_dir = Path(result["run_dir"])
    records = live_lines(run_dir)
    named = [r["straggler"] for r in records if r["straggler"]]
    assert named and {s["rank"] for s in named} == {"1"}
    since = named[-1]["named_since_step"]
    assert 9 <= since <= 9 + 3, since  # its 9th step is the first to end late; 3 of 5 steps then lag
    assert 45 <= named[-1]["lag_ms"] <= 80, named[-1]
    assert records[-1]["common_step"] == 24  # the last poll, after the steps ended, saw the last steps
    assert "profilectl: live: step" in done.stderr and "rank 1 is the one the others wait for" in done.stderr
    notes = result["manifest"]["notes"]
    assert f"live view: rank 1 was first named the one the others wait for at step {since} " \
           f"({len(records)} update(s) in live.jsonl)" in notes
    assert any(o["path"] == "live.jsonl" for o in result["manifest"]["outputs"])
    assert result["summary"]["step_time"] is not None  # the report is whole


def test_profile_live_names_no_one_when_the_ranks_are_equal(tmp_path):
    result, _ = profile_live(tmp_path, "--steps", "16")
    records = live_lines(Path(result["run_dir"]))
    assert records and all(r["straggler"] is None for r in records)
    assert records[-1]["verdict"].startswith("no straggler: the largest lag is rank ")
    assert any(n.startswith("live view: no straggler named") for n in result["manifest"]["notes"])


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize("late", [True, False], ids=["a-sleeping-rank", "equal-ranks"])
def test_watch_follows_a_run_another_process_writes(tmp_path, late):
    workload = ["--steps", "36", "--step-ms", "40"] + (["--sleep-rank", "1", "--sleep-from", "10"] if late else [])
    run = subprocess.Popen([*PROFILECTL, "profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(tmp_path),
                            "--", *RANKS, *workload], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("*/manifest.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (run_dir,) = [p.parent for p in tmp_path.glob("*/manifest.json")]
        watched = subprocess.run([*PROFILECTL, "watch", str(run_dir), "--interval", "0.2"], capture_output=True,
                                 text=True, timeout=120)
        assert run.wait(timeout=120) == 0
    finally:
        run.kill()
    assert watched.returncode == 0, watched.stderr
    assert watched.stderr.strip().splitlines()[-1] == "profilectl: the run ended: ok"
    lines = watched.stdout.splitlines()
    assert lines and all(line.startswith("live: step ") for line in lines)
    named = [line for line in lines if "rank 1 is the one the others wait for" in line]
    if late:  # its 11th step is the first to end late: named by the 13th, said at the poll that saw it
        since = int(named[0].rsplit("(named since step ", 1)[1].rstrip(")"))
        assert 11 <= since <= 11 + 3, named[0]
        assert "36" in lines[-1].split("|")[0] and "rank 1 is the one" in lines[-1]  # the last steps, read
    else:
        assert named == [] and "no straggler" in lines[-1]
    assert not (run_dir / "live.jsonl").exists()
    before = snapshot(run_dir)
    again = subprocess.run([*PROFILECTL, "watch", str(run_dir)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and snapshot(run_dir) == before  # read-only: nothing written, nothing touched


def test_watch_refuses_a_path_that_is_not_a_run(tmp_path):
    for path in (tmp_path, tmp_path / "missing"):
        done = subprocess.run([*PROFILECTL, "watch", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "not a profilectl run directory or SLURM job folder" in done.stderr


def test_live_is_offered_shown_and_planned_without_changing_the_command(machine):
    for service in ("trace", "profile"):
        help_text = subprocess.run([*PROFILECTL, service, "--help"], capture_output=True, text=True, timeout=60).stdout
        assert "--live" in help_text
    program = [sys.executable, "train.py"]
    plain, live = (json.loads(cli(machine, "trace", "--dry-run", "--json", *extra, "--", *program).stdout)
                   for extra in ([], ["--live"]))
    assert [s["argv"] for s in live["phases"][0]["steps"]] == [s["argv"] for s in plain["phases"][0]["steps"]]
    assert live["request"]["live"] is True and any(n.startswith("--live: each rank's last steps") for n in live["notes"])
    shown = cli(machine, "trace", "--dry-run", "--live", "--", *program)
    assert shown.returncode == 0 and "--live: each rank's last steps" in shown.stdout and "train.py" in shown.stdout


def test_a_gpu_tracer_without_a_hook_of_its_own_gets_one_that_only_marks_steps(machine):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0")
    machine.double("nsys")
    program = [sys.executable, "train.py"]
    plan = json.loads(cli(machine, "trace", "--backend", "nsys", "--dry-run", "--json", "--live", "--", *program).stdout)
    env = plan["phases"][0]["environment"]
    assert env["PROFILECTL_STATUS_OUT"] == f"{plan['run_dir']}/raw/live-steps"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(HOOK) and env["PROFILECTL_SINGLE"] == "1"
    assert not {"PROFILECTL_TORCH_OUT", "PROFILECTL_STEPS", "PROFILECTL_RANGE", "PROFILECTL_STEP_ACTION"} & set(env)
    without = json.loads(cli(machine, "trace", "--backend", "nsys", "--dry-run", "--json", "--", *program).stdout)
    assert "PROFILECTL_STATUS_OUT" not in without["phases"][0]["environment"]


SYSTEM_PYTHON = "/usr/bin/python3"


def system_torch() -> bool:
    return os.access(SYSTEM_PYTHON, os.X_OK) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
        capture_output=True).returncode == 0


@pytest.mark.skipif(not system_torch(), reason="needs Debian's python3-torch with gloo at /usr/bin/python3 "
                                               "(tools/install-host-deps --tests installs it as root)")
def test_trace_live_names_the_sleeping_rank_of_a_ddp_job_under_torch_profiler(machine):
    from test_launchers import DDP, torchrun
    done = cli(machine, "trace", "--live", "--json", "--", *torchrun(), DDP, "--steps", "14", "--sleep-rank", "1",
               "--sleep-ms", "150", timeout=300)
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["manifest"]["backend"] == "torch", result["message"]
    records = live_lines(Path(result["run_dir"]))
    named = [r["straggler"] for r in records if r["straggler"]]
    assert named and {s["rank"] for s in named} == {"1"} and named[-1]["lag_ms"] >= 100, records[-1]
    assert named[-1]["named_since_step"] <= 5  # late from its first step: named at the 3rd after the warm-up
    assert len(list((Path(result["run_dir"]) / "raw").glob("rank-*.steps.jsonl"))) == 2
    assert [r["rank"] for r in result["summary"]["ranks"]] == ["0", "1"]  # the trace's own report, whole
