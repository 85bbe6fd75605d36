"""The measuring services end to end through the CLI, with test doubles of rocprofv3 / rocprof that
behave like the real command lines (reject a missing `--`, write the real file names, abort)."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run
from fakes import CAPS_DOCKER_DEFAULT
from support import REPO


@pytest.fixture
def amd(machine, tmp_path):
    """An MI300X (gfx942) with ROCm 7.0 and the rocprofv3 double."""
    return amd_machine(machine, tmp_path)


def test_trace_with_rocprofv3_writes_perfetto_and_tables(amd):
    result, run = json_run(amd, "trace", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    manifest = json.loads((run / "manifest.json").read_text())
    argv = manifest["argv"]
    assert argv[argv.index("--") + 1:] == WORKLOAD
    # ROCm 7.0 without `rocpd convert`: the database is read, rocprofv3 writes the Perfetto trace itself
    assert argv[argv.index("--output-format") + 1:argv.index("-d")] == ["rocpd", "pftrace"]
    assert {"--kernel-trace", "--hip-runtime-trace"} <= set(argv) and "--stats" not in argv
    assert manifest["backend"] == "rocprofv3" and manifest["tool"]["name"] == "rocprofv3"
    assert manifest["perfetto_trace"].endswith(".pftrace") and (run / manifest["perfetto_trace"]).is_file()
    assert list((run / "raw").glob("*/*_results.db"))
    kernels = (run / "kernels.csv").read_text()
    assert "addition_kernel" in kernels
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kernels"][0]["calls"] == 2 and summary["totals"]["dispatches"] == 6
    for name in ("env.json", "stdout.log", "stderr.log", "api.csv"):
        assert (run / name).is_file(), name
    assert {o["path"] for o in manifest["outputs"]} >= {"manifest.json", "kernels.csv", "summary.json"}


def test_forgotten_double_dash_is_supplied(amd):
    result, run = json_run(amd, "trace", *WORKLOAD)  # no `--` from the user
    assert result["status"] == "ok"
    assert "--" in result["manifest"]["argv"]


def test_preset_option_missing_in_rocm_62_is_left_out(amd):
    amd.rocm("6.2.4")
    result, run = json_run(amd, "trace", "--preset", "memory", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert "--memory-allocation-trace" not in argv and "--memory-copy-trace" in argv
    assert any("--memory-allocation-trace" in n for n in result["manifest"]["notes"])
    assert result["manifest"]["phases"][0]["environment"]["HSA_ENABLE_SDMA"] == "0"


def test_counters_with_rocprofv3_merges_passes_and_derives_metrics(amd):
    result, run = json_run(amd, "counters", "--set", "extended", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    jobs = json.loads((run / "raw/input.json").read_text())["jobs"]  # ROCm 7.0: JSON jobs, one per pass
    assert all(job["pmc"] for job in jobs) and len(jobs) == 2  # 11 SQ counters > 8 a pass
    assert len(list((run / "raw").glob("pass_*/*/*_results.db"))) == len(jobs)  # one process per pass
    rows = (run / "counters_by_kernel.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"SQ_WAVES", "TCC_HIT", "SQ_LDS_BANK_CONFLICT", "L2 hit rate (%)", "LDS bank conflicts per LDS instruction"} <= set(header)
    assert len(rows) == 4  # three kernels, every pass merged into one row each
    assert "validated" in " ".join(result["manifest"]["notes"])


def test_counters_62_layout_is_read(amd):
    amd.rocm("6.2.0")
    result, run = json_run(amd, "counters", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    assert "SQ_WAVES" in (run / "counters_by_kernel.csv").read_text()


def test_unknown_counter_is_refused_before_running_with_suggestion(amd, tmp_path):
    pmc = tmp_path / "mine.txt"
    pmc.write_text("pmc: SQ_WAVES SQ_INSTS_VALUE\n")
    done = cli(amd, "counters", "--set", str(pmc), "--", *WORKLOAD)
    assert done.returncode == 2
    assert "SQ_INSTS_VALUE (did you mean SQ_INSTS_VALU?)" in done.stderr
    assert not (amd.root.parent / "traces").exists() or not any((amd.root.parent / "traces").iterdir())


def test_profiler_abort_is_diagnosed_exit_4_and_kept(amd):
    result, run = json_run(amd, "counters", "--", *WORKLOAD, extra_env={"FAKE_ROCPROF_ABORT": "1"})
    assert result["exit_code"] == 4 and result["status"] == "failed"
    assert "aqlprofile API table load failed" in result["message"]
    assert "aqlprofile API table load failed" in (run / "stderr.log").read_text()
    assert json.loads((run / "manifest.json").read_text())["status"] == "failed"


def test_workload_failure_is_exit_1_with_outputs_kept(amd):
    result, run = json_run(amd, "trace", "--", sys.executable, "-c", "import sys; print('partial'); sys.exit(3)")
    assert result["exit_code"] == 1 and result["status"] == "failed"
    assert "exited with code 3" in result["message"]
    assert "partial" in (run / "stdout.log").read_text()


def test_profiler_writing_nothing_is_no_output(amd):
    result, run = json_run(amd, "trace", "--", *WORKLOAD, extra_env={"FAKE_ROCPROF_NO_OUTPUT": "1"})
    assert result["status"] == "no-output" and result["exit_code"] == 4
    assert "no readable output" in result["message"]


def test_legacy_rocprof_on_rocm_61_takes_the_app_without_double_dash(machine):
    machine.kfd_gpu(1, 90010)
    machine.rocm("6.1.2")
    machine.double("rocprof")
    result, run = json_run(machine, "counters", "--set", "basic", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert result["manifest"]["backend"] == "rocprof" and "--" not in argv
    assert argv[-len(WORKLOAD):] == WORKLOAD
    assert "SQ_WAVES" in (run / "counters_by_kernel.csv").read_text()
    result, run = json_run(machine, "trace", "--", *WORKLOAD)
    assert result["status"] == "ok" and result["manifest"]["perfetto_trace"] == "raw/results.json"


def test_counters_on_gfx1151_exit_3_or_fallback(machine):
    machine.kfd_gpu(1, 110501)
    machine.rocm("6.4.1")
    machine.double("rocprofv3")
    done = cli(machine, "counters", "--", *WORKLOAD)
    assert done.returncode == 3
    assert "gfx1151" in done.stderr and "--fallback" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    result, run = json_run(machine, "counters", "--fallback", "--", *WORKLOAD)
    assert result["status"] == "ok" and result["manifest"]["backend"] == "timing"
    assert result["manifest"]["service"] == "counters"
    assert any("gfx1151" in f["reason"] for f in result["manifest"]["fallbacks"])


def test_counters_in_container_without_perfmon_explains(machine):
    machine.kfd_gpu(1, 90402)
    machine.rocm("7.0.0")
    machine.double("rocprofv3")
    machine.container()
    machine.status(CAPS_DOCKER_DEFAULT)
    done = cli(machine, "counters", "--", *WORKLOAD)
    assert done.returncode == 3 and "CAP_PERFMON" in done.stderr


def test_dry_run_prints_plan_and_creates_nothing(amd):
    done = cli(amd, "counters", "--dry-run", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    assert "rocprofv3" in done.stdout and '"SQ_WAVES"' in done.stdout and " -- " in done.stdout
    assert not (amd.root.parent / "traces").exists()
    plan = json.loads(cli(amd, "trace", "--dry-run", "--json", "--", *WORKLOAD).stdout)
    assert plan["backend"] == "rocprofv3" and plan["phases"][0]["steps"][0]["argv"][-len(WORKLOAD):] == WORKLOAD


def test_forced_backend_unavailable_is_exit_3_unknown_is_exit_2(amd):
    assert cli(amd, "trace", "--backend", "ncu", "--", *WORKLOAD).returncode == 3
    done = cli(amd, "trace", "--backend", "nsight", "--", *WORKLOAD)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_profile_times_repeats_and_records_environment(machine):
    result, run = json_run(machine, "profile", "--repeat", "3", "--warmup", "1", "--env", "MY_KNOB=7", "--serialize",
                           "--", *WORKLOAD)
    assert result["status"] == "ok"
    timing = result["summary"]["timing"]
    assert timing["runs"] == 3 and timing["min_s"] <= timing["median_s"] <= timing["max_s"]
    assert set(timing) == {"runs", "mean_s", "median_s", "p95_s", "min_s", "max_s", "std_s"}
    env = result["manifest"]["phases"][0]["environment"]
    assert env["MY_KNOB"] == "7" and env["PYTORCH_TUNABLEOP_ENABLED"] == "0" and env["HIP_LAUNCH_BLOCKING"] == "1"
    # 1 warm-up + 3 runs, then torch.profiler's tables when this Python (the workload's) has PyTorch
    has_torch = importlib.util.find_spec("torch") is not None
    assert [s["label"] for s in result["manifest"]["steps"]][4:] == (["torch"] if has_torch else [])
    assert json.loads((run / result["manifest"]["perfetto_trace"]).read_text())["traceEvents"]


def test_default_workload_and_environment_workload(machine):
    result, _ = json_run(machine, "profile", "--repeat", "1")
    assert result["manifest"]["workload_source"] == "default" and result["status"] == "ok"
    result, _ = json_run(machine, "profile", "--repeat", "1",
                         extra_env={"PROFILECTL_WORKLOAD": f"{sys.executable} -c 'print(42)'"})
    assert result["manifest"]["workload_source"] == "environment" and result["manifest"]["workload"][-1] == "print(42)"


def test_timeout_stops_the_process_group(machine):
    started = time.monotonic()
    result, run = json_run(machine, "profile", "--timeout", "2", "--repeat", "1", "--warmup", "0", "--",
                           sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '60'])")
    assert time.monotonic() - started < 30
    assert result["status"] == "timeout" and result["exit_code"] == 124


def test_sigterm_marks_the_run_interrupted(machine):
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), PATH=machine.path_with_bin())
    traces = machine.root.parent / "traces"
    process = subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "profile", "--traces-dir", str(traces),
                                "--repeat", "1", "--warmup", "0", "--", *WORKLOAD[:2], "--seconds", "60"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not list(traces.glob("*/manifest.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 130
    manifest = json.loads(next(traces.glob("*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130 and manifest["finished_at"]


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_root_never_runs_another_users_program_as_root_unasked_and_hands_back_when_asked(machine):
    """Root for uid 12345 where that user cannot write the traces folder: not silently as root (the
    workload would be root's), one line naming --as-root; with --as-root the run is handed back."""
    for_user = {"PROFILECTL_HOST_UID": "12345", "PROFILECTL_HOST_GID": "23456"}
    (machine.root.parent / "traces").mkdir()
    refused = cli(machine, "profile", "--repeat", "1", extra_env=for_user)
    assert refused.returncode == 2 and "refusing to run uid 12345's run as root" in refused.stderr, refused.stderr
    assert "--as-root" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert list((machine.root.parent / "traces").iterdir()) == []
    result, run = json_run(machine, "profile", "--repeat", "1", "--as-root", extra_env=for_user)
    assert result["exit_code"] == 0, result["message"]
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [run, *run.rglob("*")]}
    assert owners == {(12345, 23456)}


def test_ncu_refusing_counters_is_diagnosed_exit_4(machine, tmp_path):
    """ncu started but refused by the driver: the run exits 4 with the probe's words and keeps its logs."""
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0", admin_only=0)
    ncu = machine.bin / "ncu"
    ncu.write_text("#!/bin/sh\ncase \"$1\" in --version) echo 'Version 2025.3.1.0';; --query-metrics) exit 1;; *)\n"
                   "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                   "Performance Counters on the target device 0.' >&2; exit 1;; esac\n")
    ncu.chmod(0o755)
    result, run = json_run(machine, "counters", "--", *WORKLOAD)
    assert result["exit_code"] == 4 and result["status"] == "failed"
    assert "ERR_NVGPUCTRPERM" in result["message"] and "NVreg_RestrictProfilingToAdminUsers" in result["message"]
    assert "ERR_NVGPUCTRPERM" in (run / "stderr.log").read_text()
    assert "could not list this GPU's counters" in " ".join(result["manifest"]["notes"])


@pytest.mark.parametrize("args, words", [
    (["counters", "--set", "basci"], "did you mean 'basic'"),
    (["counters", "--set", "broken.yaml"], "not valid YAML"),
    (["counters", "--set", "broken.txt"], "expected 'pmc:"),
    (["trace", "--preset", "lightwieght"], "did you mean 'lightweight'"),
    (["profile", "--", "no-such-program-xyz"], "was not found on PATH"),
    (["profile", "--timeout", "0"], "--timeout: must be a positive"),
    (["profile", "--timeout", "nan"], "--timeout: must be a positive"),
    (["profile", "--timeout", "inf"], "--timeout: must be a positive"),
    (["profile", "--env", "NOEQUALS"], "KEY=VALUE"),
])
def test_request_mistakes_are_usage_errors_before_the_machine_is_judged(machine, args, words):
    if args[0] == "counters" and args[2].endswith((".yaml", ".txt")):
        target = machine.root.parent / args[2]
        target.write_text("amd:\n  counters: [SQ_WAVES\n" if target.suffix == ".yaml" else "pmc: SQ_WAVES\nSQ_BUSY\n")
        args = [args[0], args[1], str(target)]
    # On this machine counters are unavailable (exit 3), but a mistake in the request comes first.
    done = cli(machine, *args)
    assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (machine.root.parent / "traces").exists()


NCU_DOUBLE = """#!/bin/sh
case "$1" in --version) echo 'Version 2025.3.1.0'; exit 0;; --query-metrics) printf 'gpu__time_duration\\nsm__warps_launched\\nsm__inst_executed\\ndram__bytes_read\\ndram__bytes_write\\n'; exit 0;; esac
echo "$@" > "$NCU_ARGV"
while [ "$1" != "--log-file" ]; do shift; done
log="$2"; shift 2
"$@"
printf '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\\n"0","1","k","gpu__time_duration.sum","usecond","2"\\n"0","1","k","sm__warps_launched.sum","warp","64"\\n' > "$log"
"""


@pytest.mark.parametrize("clock, words", [(None, "clocks locked to base"), ("none", "clocks not controlled")])
def test_ncu_clock_control_is_explicit_and_labels_kernel_times(machine, tmp_path, clock, words):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0")
    ncu = machine.bin / "ncu"
    ncu.write_text(NCU_DOUBLE)
    ncu.chmod(0o755)
    extra = ["--clock-control", clock] if clock else []
    result, run = json_run(machine, "counters", *extra, "--", *WORKLOAD, extra_env={"NCU_ARGV": str(tmp_path / "argv")})
    assert result["status"] == "ok", result["message"]
    argv = (tmp_path / "argv").read_text().split()
    assert argv[argv.index("--clock-control") + 1] == (clock or "base")
    assert result["summary"]["kernel_timing"].endswith(f"({words})")
    assert any("--clock-control" in note for note in result["manifest"]["notes"])


def test_a_failing_workload_runs_once_not_once_per_repeat(amd, tmp_path):
    """`profile --repeat 5` of a workload that fails: its first failure is the answer, no five more."""
    counter = tmp_path / "runs.txt"
    script = f"import sys; open({str(counter)!r}, 'a').write('x'); sys.exit(3)"
    result, run = json_run(amd, "profile", "--backend", "timing", "--repeat", "5", "--warmup", "1",
                           "--", sys.executable, "-c", script)
    assert result["exit_code"] == 1 and result["status"] == "failed"
    assert counter.read_text() == "x"
    steps = json.loads((run / "manifest.json").read_text()).get("steps", [])
    assert [s["exit_code"] for s in steps] in ([3], [])
