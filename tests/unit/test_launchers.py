"""Multi-rank jobs through the real launchers: torchrun / python -m torch.distributed.run and Open
MPI's mpirun, running a CPU data-parallel job (gloo) with Debian's PyTorch; and the bounded-
profiling vocabulary as each backend's own flags, proven by doubles that record their argv."""

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run
from support import REPO

SYSTEM_PYTHON = "/usr/bin/python3"
DDP = str(REPO / "tests/workloads/ddp.py")


def system_torch() -> bool:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                          capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not system_torch(), reason="needs Debian's python3-torch with gloo at /usr/bin/python3 "
                                                            "(tools/install-host-deps --tests installs it as root)")
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun (openmpi-bin)")
# Debian's torch 1.13 on Python 3.11 cannot parse its own default `--redirects 0` / `--tee 0` (IntFlag
# iteration changed in 3.11): any non-zero value works around it.
# `--standalone` of torch 1.13 always listens on port 29400: two test suites on one machine (or a
# user's own job) would share one rendezvous. Each launch gets its own free port instead.


def torchrun() -> list[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return ["/usr/bin/torchrun", "--nproc_per_node=2", "--nnodes=1", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=test-{os.getpid()}-{port}",
            "--redirects", "1", "--tee", "1"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


def traces_of(run: Path) -> list[Path]:
    return sorted((run / "raw").glob("*.pt.trace.json"))


def step_markers(trace: Path) -> set[str]:
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}


@needs_torch
@pytest.mark.parametrize("launcher", [[], [SYSTEM_PYTHON, "-m", "torch.distributed.run"]],
                         ids=["torchrun", "python-m-torch.distributed.run"])
def test_trace_profiles_every_rank_torchrun_starts(machine, launcher):
    argv = torchrun() if not launcher else [*launcher, *torchrun()[1:]]
    result, run = json_run(machine, "trace", "--", *argv, DDP, "--steps", "4", timeout=300)
    assert result["status"] == "ok", result["message"]
    assert result["manifest"]["backend"] == "torch"
    traces = traces_of(run)
    assert [t.name.split("-")[-2] for t in traces] == ["rank0", "rank1"]  # <host>-rank<R>-<pid>.pt.trace.json
    summary = result["summary"]
    assert [(r["rank"], r["status"]) for r in summary["ranks"]] == [("0", "ok"), ("1", "ok")]
    ranges = [a for a in summary["annotations"] if a["name"] == "Optimizer.step#SGD.step"]  # a range, not an operator
    assert sorted(r["rank"] for r in ranges) == ["0", "1"] and sum(r["calls"] for r in ranges) == 2 * 4  # both ranks' steps
    assert not any(o["name"] == "Optimizer.step#SGD.step" for o in summary["operators"])
    for trace in traces:  # a whole-run trace marks its steps too (the per-step breakdown, HTA read them)
        doc = json.loads(trace.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc  # torch 1.13 writes a bare list
        ranges = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
                  and e.get("cat") in (None, "user_annotation", "cpu_op")]  # CPU-side (torch 2.x also GPU-side)
        assert len(ranges) == 4 + 1, (trace.name, ranges)  # four steps, then the rest until the end


@needs_torch
def test_steps_window_profiles_only_those_steps_in_every_rank(machine):
    result, run = json_run(machine, "trace", "--steps", "2:4", "--", *torchrun(), DDP, "--steps", "6", timeout=300)
    assert result["status"] == "ok", result["message"]
    assert "PROFILECTL_STEPS" in result["manifest"]["phases"][0]["environment"]
    for trace in traces_of(run):
        # two steps of six recorded; torch 1.13 labels a step one lower than 2.x does (its
        # profile.step() names the new step with the number before the increment): #1-#2 or #2-#3
        markers = sorted(int(m.split("#")[1]) for m in step_markers(trace))
        assert len(markers) == 2 and markers[1] == markers[0] + 1 and markers[0] in (1, 2), (trace.name, markers)


@needs_torch
@needs_mpirun
def test_mpirun_ranks_are_profiled(machine):
    result, run = json_run(machine, "trace", "--", *MPIRUN, SYSTEM_PYTHON, DDP, "--steps", "3", timeout=300)
    assert result["status"] == "ok", result["message"]
    assert len(traces_of(run)) == 2
    assert [r["rank"] for r in result["summary"]["ranks"]] == ["0", "1"]


@needs_torch
def test_a_failing_rank_is_named_and_the_others_files_are_kept(machine):
    done = cli(machine, "trace", "--json", "--", *torchrun(), DDP, "--steps", "6", "--fail-rank", "1", timeout=300)
    result, run = json.loads(done.stdout), Path(json.loads(done.stdout)["run_dir"])  # torchrun prints its own traceback
    assert done.returncode == result["exit_code"] == 1 and result["status"] == "failed"
    assert "rank 1" in result["message"] and "other ranks' files are kept" in result["message"], result["message"]
    names = [t.name for t in traces_of(run)]
    assert any("-rank0-" in n for n in names), names  # rank 0 was stopped by torchrun and still exported


@needs_mpirun
def test_rocprofv3_runs_inside_mpirun_with_per_rank_files(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2")
    result, run = json_run(machine, "counters", "--", *MPIRUN, *WORKLOAD, timeout=300)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert argv[:len(MPIRUN)] == MPIRUN and Path(argv[len(MPIRUN)]).name == "rocprofv3"  # mpirun ... rocprofv3 ...
    assert argv[argv.index("-o") + 1] == "%hostname%/rank%rank%-%pid%"
    files = sorted(p.name.split("-")[0] for p in (run / "raw").glob("pass_1/*/rank*_results.db"))  # rocpd from 7.0
    assert files == ["rank0", "rank1"]
    assert [r["rank"] for r in result["summary"]["ranks"]] == ["0", "1"]


def plan_argv(machine, *args):
    done = cli(machine, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["phases"][0]["steps"][0]["argv"]


def test_bounds_become_rocprofv3_flags(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2")
    argv = plan_argv(machine, "counters", "--dry-run", "--json", "--kernel", "gemm", "--exclude-kernel", "relu",
                     "--launch-skip", "2", "--launch-count", "3", "--profiler-args", "--log-level warning", "--", *WORKLOAD)
    assert argv[argv.index("--kernel-include-regex") + 1] == "gemm"
    assert argv[argv.index("--kernel-exclude-regex") + 1] == "relu|nccl|rccl"  # collectives left out by default
    assert argv[argv.index("--kernel-iteration-range") + 1] == "[3-5]"  # per kernel, 1-based, inclusive
    assert argv[argv.index("--") - 2:argv.index("--")] == ["--log-level", "warning"]
    argv = plan_argv(machine, "counters", "--dry-run", "--json", "--include-collectives", "--", *WORKLOAD)
    assert "--kernel-exclude-regex" not in argv
    argv = plan_argv(machine, "trace", "--dry-run", "--json", "--steps", "5:10", "--", *WORKLOAD)
    assert "--selected-regions" in argv


def test_bounds_become_ncu_flags(machine):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0")
    machine.tool("ncu", "Version 2025.3.1.0\n")
    argv = plan_argv(machine, "counters", "--dry-run", "--json", "--kernel", "gemm", "--exclude-kernel", "relu",
                     "--launch-skip", "2", "--launch-count", "3", "--range", "forward", "--", *WORKLOAD)
    assert argv[argv.index("--kernel-name") + 1] == "regex:^(?!.*(?:relu|nccl)).*(?:gemm)"
    assert argv[argv.index("--launch-skip") + 1] == "2" and argv[argv.index("--launch-count") + 1] == "3"
    assert argv[argv.index("--nvtx-include") + 1] == "forward/" and "--nvtx" in argv
    done = cli(machine, "counters", "--dry-run", "--json", "--steps", "3:5", "--", *WORKLOAD)
    plan = json.loads(done.stdout)
    argv, env = plan["phases"][0]["steps"][0]["argv"], plan["phases"][0]["environment"]
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert env["PROFILECTL_STEP_ACTION"] == "cuda-profiler" and env["PROFILECTL_STEPS"] == "3:5"


@pytest.mark.parametrize("args, words", [
    (["counters", "--launch-count", "0"], "--launch-count must be at least 1"),
    (["counters", "--kernel", "gemm(["], "is not a valid regular expression"),
    (["trace", "--steps", "5:2"], "the first step must come before the end"),
    (["trace", "--steps", "five"], "--steps expects A:B"),
    (["trace", "--", "torchrun", "--nproc_per_node", "2"], "torchrun with no program after it"),
    (["trace", "--", "mpirun", "-np", "2"], "mpirun with no program after it"),
])
def test_bounded_and_launcher_mistakes_are_one_line_exit_2(machine, args, words):
    full = args if "--" in args else [*args, "--", *WORKLOAD]
    done = cli(machine, *full)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_backend_that_cannot_honour_a_bound_says_which(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="6.2.4")
    done = cli(machine, "counters", "--kernel", "gemm", "--", *WORKLOAD)
    assert done.returncode == 2 and "cannot honour --kernel" in done.stderr, done.stderr
    assert "rocprofv3 of rocprofiler-sdk 0.4.0 (ROCm 6.2.4" in done.stderr  # placed by its SDK version
    assert "from ROCm 6.3" in done.stderr


@needs_mpirun  # the plan checks that the workload's program, mpirun, is on PATH
def test_ncu_wraps_every_launcher_and_refuses_srun(machine):
    """ncu's --log-file expands no placeholders (Nsight Compute 2025.3, docs/validation.md): one ncu
    around the launcher follows its children; srun's tasks are no children of srun."""
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0")
    machine.tool("ncu", "Version 2025.3.1.0\n")
    machine.tool("srun")  # SLURM's client on PATH; this host need not have it
    argv = plan_argv(machine, "counters", "--dry-run", "--json", "--", *MPIRUN, *WORKLOAD)
    assert Path(argv[0]).name == "ncu" and argv[-len(MPIRUN) - len(WORKLOAD):] == [*MPIRUN, *WORKLOAD]
    done = cli(machine, "counters", "--dry-run", "--", "srun", "-n", "2", *WORKLOAD)
    assert done.returncode == 2 and "srun" in done.stderr and "profilectl itself as the task" in done.stderr
