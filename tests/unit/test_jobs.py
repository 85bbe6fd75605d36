"""profilectl as the tasks of a SLURM job step, played by real profilectl processes given the
variables slurmd gives every task (the real cluster: tests/integration/test_slurm_cluster.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profilectl import jobs
from support import REPO

START = 1795000000  # 2026-11-18T11:06:40Z
WORKLOAD = [sys.executable, "-c", "import time; time.sleep(0.2)"]


def task_env(rank: int, ntasks: int, node: str = "nodeA", job: str = "77", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update(SLURM_JOB_ID=job, SLURM_STEP_ID="0", SLURM_PROCID=str(rank), SLURM_NTASKS=str(ntasks),
               SLURMD_NODENAME=node, SLURM_JOB_START_TIME=str(START))
    env.update({"PROFILECTL_JOB_WAIT_S": "5", **extra})
    return env


def start_task(traces: Path, rank: int, ntasks: int, workload=WORKLOAD, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "profile", "--repeat", "1",
                             "--warmup", "0", "--traces-dir", str(traces), "--", *workload],
                            env=task_env(rank, ntasks, **kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_slurm_task_identity_comes_from_slurmd_variables():
    assert jobs.SlurmTask.from_env({"SLURM_JOB_ID": "5"}) is None  # an sbatch script: no step, no task
    task = jobs.SlurmTask.from_env(task_env(3, 4, node="gpu-17"))
    assert (task.job_id, task.step_id, task.rank, task.ntasks, task.node) == ("77", "0", 3, 4, "gpu-17")
    assert task.job_dir(Path("/t"), "trace") == Path("/t/20261118T110640Z-trace-job77.0")
    assert task.rank_dir(Path("/t/j")) == Path("/t/j/gpu-17-rank3")
    assert jobs.rank_of(Path("gpu-17-rank3")) == (3, "gpu-17")


def test_ranks_started_together_share_one_job_folder(tmp_path):
    procs = [start_task(tmp_path, rank, 2) for rank in (0, 1)]
    results = [finish(p) for p in procs]
    assert [code for code, _, _ in results] == [0, 0], results
    [job] = tmp_path.iterdir()
    assert job.name == "20261118T110640Z-profile-job77.0"
    assert sorted(p.name for p in job.iterdir()) == ["job.json", "nodeA-rank0", "nodeA-rank1"]
    manifest = jobs.JobManifest.read(job)
    assert (manifest.status, manifest.ntasks, manifest.nodes, manifest.service) == ("ok", 2, ("nodeA",), "profile")
    assert [(r.rank, r.status, r.run) for r in manifest.ranks] == [(0, "ok", "nodeA-rank0"), (1, "ok", "nodeA-rank1")]
    # rank 0 speaks for the job; rank 1 prints its own line only
    assert "job 77.0: ok: 2 ranks on 1 node(s), all ok" in results[0][2]
    assert "job 77.0" not in results[1][2] and results[1][1].startswith("rank 1 on nodeA: ok profile")


def test_ranks_missing_from_the_folder_say_it_is_not_shared(tmp_path):
    code, _, err = finish(start_task(tmp_path, 0, 3, PROFILECTL_JOB_WAIT_S="0.5"))
    assert code == 0  # this rank's run is complete; the job's folder is not
    job = jobs.JobManifest.read(next(tmp_path.iterdir()))
    assert job.status == "incomplete"
    assert "rank(s) 1-2 left no run in this folder, which holds only nodeA's ranks" in job.message
    assert "not shared between the nodes" in err and len(err.strip().splitlines()) == 1


def test_scratch_mode_expects_one_node_per_folder(tmp_path):
    code, _, err = finish(start_task(tmp_path, 0, 3, PROFILECTL_JOB_SCRATCH="1", PROFILECTL_JOB_WAIT_S="30"))
    assert code == 0 and err == ""  # no wait for the other nodes' ranks, no false alarm


def test_a_rank_folder_from_an_earlier_job_with_the_same_id_is_refused(tmp_path):
    assert finish(start_task(tmp_path, 0, 1))[0] == 0
    code, out, err = finish(start_task(tmp_path, 0, 1))
    assert code == 2 and out == ""
    assert err.startswith("profilectl: ") and "already holds rank 0 of an earlier job 77.0" in err
    assert len(err.strip().splitlines()) == 1


def test_a_rank_killed_with_its_node_reads_as_lost(tmp_path):
    """SIGKILL of a rank's profilectl (its node gone): its manifest stays `running`, its lock is
    released; the other rank's job.json, and a fresh compose, name the rank and node lost."""
    doomed = start_task(tmp_path, 1, 2, node="nodeB", workload=[sys.executable, "-c", "import time; time.sleep(60)"])
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("*/nodeB-rank1/manifest.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the workload has started under the supervisor
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=10)
    code, _, err = finish(start_task(tmp_path, 0, 2, WORKLOAD))
    assert code == 0
    [job_dir] = tmp_path.iterdir()
    job = json.loads((job_dir / "job.json").read_text())
    assert job["status"] == "failed" and job["message"] == "rank 1: node nodeB lost", job
    assert [(r["rank"], r["host"], r["status"]) for r in job["ranks"]] == [(0, "nodeA", "ok"), (1, "nodeB", "lost")]
    assert "job 77.0: failed: rank 1: node nodeB lost" in err
    assert jobs.compose(job_dir).message == "rank 1: node nodeB lost"  # ls and report see the same


def test_job_message_groups_ranks_by_node_and_cause():
    ranks = [jobs.JobRank(rank=r, host="n1", status="failed", run=f"n1-rank{r}", exit_code=3) for r in range(4)]
    ranks += [jobs.JobRank(rank=r, host="n2", status="lost", run=f"n2-rank{r}") for r in range(4, 8)]
    ranks += [jobs.JobRank(rank=8, host="n3", status="ok", run="n3-rank8")]
    assert jobs._job_status(ranks, 10) == (
        "failed", "ranks 0-3: failed on n1 (exit code 3); ranks 4-7: node n2 lost; rank(s) 9 left no run in this "
        "folder, which holds only n1, n2, n3's ranks: the traces folder is not shared between the nodes (use "
        "--traces-dir on a shared file system, or copy every node's job folder here)")


@pytest.mark.parametrize("argv, expected", [
    (["srun", "-N2", "-n4"], "srun with no program after it"),
    (["srun", "--ntasks"], "srun with no program after it"),  # an option that wants a value, at the end
])
def test_srun_bad_input_is_one_line(tmp_path, argv, expected):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "trace", "--dry-run", "--traces-dir",
                           str(tmp_path), "--", *argv], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=os.environ["PATH"]))
    assert done.returncode == 2 and expected in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_slurm_not_installed_is_said(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "trace", "--traces-dir", str(tmp_path),
                           "--", "srun", "-n2", "python3", "-c", "1"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=str(bare)))
    assert done.returncode == 2
    assert done.stderr.strip() == ("profilectl: workload program 'srun' was not found on PATH: SLURM is not installed "
                                   "here (or its commands are not on PATH); run on a node of the cluster, or see "
                                   "docker/slurm for a test cluster")


def test_srun_that_cannot_reach_a_controller_is_named(tmp_path):
    """srun installed but no cluster configured: srun's own fatal line becomes the run's message."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\necho 'srun: error: fetch_config: DNS SRV lookup failed' >&2\n"
                    "echo 'srun: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    srun.chmod(0o755)
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "trace", "--backend", "timing",
                           "--traces-dir", str(tmp_path / "t"), "--", "srun", "-n2", sys.executable, "-c", "1"],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert done.returncode == 1
    assert "profilectl: failed: srun failed: Could not establish a configuration source (exit 1)" in done.stderr
