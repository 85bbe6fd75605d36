"""`--ranks 0-3,8`: one vocabulary, rocprofv3's --profile-mpi-ranks from ROCm 7.2, profilectl's rank
gate before (real mpirun ranks under the rocprofv3 double; only the selected ranks write files); a
listed rank the job does not start: one line where the command line says the job's size, the ranks
that exist (and a note) where it does not; the same on every release."""

import shutil
from pathlib import Path

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3"]
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun (openmpi-bin)")


@needs_mpirun
@pytest.mark.parametrize("rocm, selector", [("7.0.2", "gate"), ("7.2.1", "--profile-mpi-ranks")])
def test_only_the_selected_ranks_are_profiled(machine, tmp_path, rocm, selector):
    amd_machine(machine, tmp_path, rocm=rocm)
    result, run = json_run(machine, "trace", "--ranks", "0,2", "--", *MPIRUN, *WORKLOAD, timeout=300)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    if selector == "gate":
        assert Path(argv[len(MPIRUN) + 3]).name == "rank_gate.py" and "--profile-mpi-ranks" not in argv
    else:
        assert argv[argv.index("--profile-mpi-ranks") + 1] == "0,2"
    ranks = sorted(p.name.split("-")[0] for p in (run / "raw").glob("*/rank*_results.db"))
    assert ranks == ["rank0", "rank2"]


def test_ranks_refused_where_no_rank_can_be_selected(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.2.1")
    done = cli(machine, "trace", "--ranks", "0", "--", *WORKLOAD)
    assert done.returncode == 2 and "one process" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    bad = cli(machine, "trace", "--ranks", "3-1", "--", *MPIRUN, *WORKLOAD)
    assert bad.returncode == 2 and "runs backwards" in bad.stderr


@pytest.mark.parametrize("rocm", ["7.0.2", "7.2.1"])
def test_a_rank_the_job_does_not_start_is_one_line_on_every_release(machine, tmp_path, rocm):
    """7.2+'s --profile-mpi-ranks would stop every rank with a fatal error; the gate before it would
    quietly run the others: profilectl says so before anything runs, the same on both."""
    amd_machine(machine, tmp_path, rocm=rocm)
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"]
    for command in (["trace"], ["trace", "--dry-run"]):
        done = cli(machine, *command, "--ranks", "0-3,8", "--", *mpirun, *WORKLOAD)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "starts 4 rank(s), 0-3" in lines[0] and "no rank 8" in lines[0]


@needs_mpirun
def test_without_the_jobs_size_the_gate_runs_the_ranks_that_exist(machine, tmp_path):
    """mpirun with no -np starts one rank per slot: the size is not on the command line, so 7.2's
    --profile-mpi-ranks (fatal in every rank for a rank beyond the job) is not used; the gate runs
    rank 0 profiled and the others plain, and the manifest says why."""
    amd_machine(machine, tmp_path, rocm="7.2.1")
    mpirun = ["mpirun", "--allow-run-as-root", "--host", "localhost:2"]
    result, run = json_run(machine, "trace", "--ranks", "0,5", "--", *mpirun, *WORKLOAD, timeout=300)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert "--profile-mpi-ranks" not in argv and any(Path(a).name == "rank_gate.py" for a in argv)
    assert any("does not say how many ranks" in n for n in result["manifest"]["notes"])
    assert sorted(p.name.split("-")[0] for p in (run / "raw").glob("*/rank*_results.db")) == ["rank0"]
