"""`--ranks 0-3,8`: one vocabulary, rocprofv3's --profile-mpi-ranks from ROCm 7.2, profilectl's rank
gate before (real mpirun ranks under the rocprofv3 double; only the selected ranks write files)."""

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
