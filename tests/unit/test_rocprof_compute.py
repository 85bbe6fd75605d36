"""rocprof-compute (rocprofiler-compute) as a counters backend: its two commands as each release's
parser takes them (the double accepts exactly those options), its workload files and analyze tables
read (real captures and the documentation's real speed-of-light figures, tests/fixtures/
rocprofiler-compute), the whole workload placed by the roofline's rule, and compare of two workloads."""

import json
import shutil
import subprocess
import sys

import pytest

from cli_support import WORKLOAD, cli, json_run
from support import REPO

FIXTURES = REPO / "tests/fixtures/rocprofiler-compute"
VECCOPY = "vecCopy(double*, double*, double*, int, int) [clone .kd]"


@pytest.fixture
def mi200(machine):
    """An MI200 (gfx90a) with ROCm 7.0 and rocprof-compute, no rocprofv3."""
    machine.kfd_gpu(1, 90010)
    machine.rocm("7.0.2")
    machine.double("rocprof-compute")
    return machine


def workload_folder(tmp_path, pmc="mi300x_vecCopy_pmc_perf.csv"):
    """A workload folder as rocprof-compute leaves it, with analyze's --save-dfs tables beside."""
    folder = tmp_path / "workloads" / "vcopy" / "MI300X_A1"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / pmc, folder / "pmc_perf.csv")
    shutil.copy(FIXTURES / "mi200_vcopy_save-dfs/2.1_Speed-of-Light.csv", folder / "2.1_Speed-of-Light.csv")
    return folder


# ------------------------------------------------------------------ reading real files
def test_pmc_perf_gives_kernels_and_summed_counters_not_instances(tmp_path):
    from profilectl.formats.rocprof_compute import RocprofComputeReader
    folder = workload_folder(tmp_path)
    tables = RocprofComputeReader().read([folder / "pmc_perf.csv"])
    (name, stats), = tables.kernels.items()
    assert name == "vecCopy(double*, double*, double*, int, int) (.kd)"
    assert stats.calls == 3 and stats.total == 43_159  # the three dispatches' End - Start
    counters = {c.counter: c for c in tables.counters}
    assert counters["TCC_BUBBLE_sum"].total == 3 * 65536 and counters["TCC_BUBBLE_sum"].dispatches == 3
    assert not any("[" in name or name.startswith(("Wave_Size", "Dispatch_ID", "GPU_ID")) for name in counters)


def test_speed_of_light_places_the_workload_by_the_roofline_rule(tmp_path):
    """The documentation's MI200 vcopy: L2-Fabric read 25.42 % + write 17.84 % of the HBM peak = 43.26 %,
    L2 37.23 %, busiest compute pipe (VALU IOPs) 1.61 %: under 60 % everywhere, latency-bound, with HBM
    the best roof."""
    from profilectl.formats import rocprof_compute
    values, utilisation = rocprof_compute.speed_of_light(FIXTURES / "mi200_vcopy_save-dfs/2.1_Speed-of-Light.csv")
    assert utilisation == pytest.approx({"compute": 1.61, "hbm": 25.42 + 17.84, "l2": 37.23})
    named = {v.counter: v.total for v in values}
    assert named["L2-Fabric Read BW (Gb/s)"] == 416.52 and named["L2-Fabric Read BW (% of peak)"] == 25.42
    assert "LDS Bank Conflicts/Access (% of peak)" not in named  # an empty cell is no value
    sentence = rocprof_compute.placement(utilisation)
    assert sentence is not None and "latency-bound" in sentence and "HBM" in sentence.split("carried by")[1][:30]
    assert "memory-bound" in rocprof_compute.placement({"compute": 12.0, "hbm": 71.0, "l2": 30.0})
    assert "compute-bound" in rocprof_compute.placement({"compute": 88.0, "hbm": 10.0})


def test_a_bare_workload_folder_is_reported_with_its_roofline(tmp_path):
    """`report` on the folder rocprof-compute wrote on an MI200: the GPU from sysinfo.csv, the HBM
    bytes by the gfx90a formula (test_roofline.py's by-hand 16,777,728 B in 20,160 ns), placed against
    the datasheet's HBM roof; the speed-of-light verdict beside it."""
    folder = workload_folder(tmp_path, "mi200_vecCopy_pmc_perf.csv")
    shutil.copy(FIXTURES / "mi200_sysinfo.csv", folder / "sysinfo.csv")
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(folder), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["metadata"]["gpu"] == "MI200 (gfx90a)" and doc["metadata"]["host"] == "t007-002.hpcfund"
    assert any("rocprof-compute speed-of-light" in n and "latency-bound" in n for n in doc["notes"])
    (kernel,) = doc["roofline"]["kernels"]
    assert kernel["kernel"] == VECCOPY and kernel["bytes"][0] == ["hbm", 16_777_728]
    section = next(s for s in doc["sections"] if s["key"] == "roofline")
    (row,) = section["tables"][0]["rows"]
    assert row["hbm_bytes"] == 16_777_728 and row["verdict"] == "latency-bound"  # 51 % of the datasheet's HBM


def test_a_truncated_pmc_perf_is_one_line_exit_2(tmp_path):
    folder = workload_folder(tmp_path)
    lines = (folder / "pmc_perf.csv").read_text().splitlines()
    (folder / "pmc_perf.csv").write_text("\n".join(lines[:2] + [lines[2][:40]]) + "\n")
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "pmc_perf.csv:3: truncated or malformed row" in done.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------ the service end to end
def test_counters_run_profile_then_analyze_and_read_both(mi200):
    result, run = json_run(mi200, "counters", "--set", "roofline", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"] == "rocprof-compute"
    assert any(f["backend"] == "rocprofv3" for f in manifest["fallbacks"])
    profile, analyze = manifest["phases"][0]["argv"]
    assert profile[1:3] == ["profile", "--name"] and profile[profile.index("--") + 1:] == WORKLOAD
    assert profile[profile.index("--path") + 1] == str(run / "raw/workload")
    assert analyze[1:2] == ["analyze"] and analyze[analyze.index("--save-dfs") + 1] == str(run / "raw/analyze")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kernels"][0]["name"] == VECCOPY and summary["kernels"][0]["total_ns"] == 20_160
    rows = {r["kernel"]: r for r in summary["counters_by_kernel"]}
    assert rows[VECCOPY]["bytes_hbm"] == 64 * 131080 + 64 * 131072  # test_roofline.py's MI200 figure
    assert rows["all kernels (rocprof-compute analyze)"]["L2-Fabric Read BW (% of peak)"] == 25.42
    assert summary["roofline"]["kernels"][0]["kernel"] == VECCOPY
    assert any("rocprof-compute speed-of-light" in n and "latency-bound" in n for n in summary["notes"])


def test_dry_run_shows_both_commands(mi200):
    done = cli(mi200, "counters", "--dry-run", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    assert "rocprof-compute profile --name" in done.stdout and "rocprof-compute analyze --path" in done.stdout
    assert not (mi200.root.parent / "traces").exists() or not any((mi200.root.parent / "traces").iterdir())


@pytest.mark.parametrize("version,pinned", [("3.0.0", False), ("3.2.2", True), ("3.3.0", True)])
def test_each_release_parser_takes_the_commands(mi200, version, pinned):
    """The double's parser is each release's: --format-rocprof-output only where it exists (3.0.0
    would refuse it: unrecognized arguments)."""
    env = {"FAKE_ROCPROF_COMPUTE_VERSION": version}
    result, run = json_run(mi200, "counters", "--", *WORKLOAD, extra_env=env)
    assert result["status"] == "ok", result["message"]
    profile = result["manifest"]["phases"][0]["argv"][0]
    assert ("--format-rocprof-output" in profile) == pinned
    tables = sorted(p.name for p in (run / "raw/analyze").iterdir())
    assert tables[0] == ("2.1_System_Speed-of-Light.csv" if version == "3.3.0" else "2.1_Speed-of-Light.csv")


def test_compare_two_workloads(mi200):
    _, before = json_run(mi200, "counters", "--", *WORKLOAD)
    _, after = json_run(mi200, "counters", "--", *WORKLOAD, extra_env={"FAKE_ROCPROF_COMPUTE_SLOWER": "2"})
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "compare", str(before), str(after),
                           "--format", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (kernel,) = result["kernels"]
    assert kernel["name"] == VECCOPY and kernel["total_ns_a"] == 20_160 and kernel["total_ns_b"] == 40_320
    assert result["totals"]["speedup"] == pytest.approx(0.5)


def test_profiler_failure_is_exit_4_and_kept(mi200):
    result, run = json_run(mi200, "counters", "--", *WORKLOAD, extra_env={"FAKE_ROCPROF_COMPUTE_FAIL": "1"})
    assert result["exit_code"] == 4 and result["status"] == "failed"
    assert "aqlprofile API table load failed" in result["message"]
    assert "Profiling command failed" in (run / "stderr.log").read_text()


def test_rdna_and_multi_rank_are_refused_in_one_line(machine):
    machine.kfd_gpu(1, 110000)  # gfx1100
    machine.rocm("7.0.2")
    machine.double("rocprof-compute")
    done = cli(machine, "counters", "--backend", "rocprof-compute", "--", *WORKLOAD)
    assert done.returncode == 3 and "no analysis for gfx1100" in done.stderr and "Traceback" not in done.stderr
    machine.kfd_gpu(1, 90010)  # an MI200 now: the job's launcher is what is refused
    machine.tool("mpirun")
    job = cli(machine, "counters", "--dry-run", "--backend", "rocprof-compute", "--", "mpirun", "-np", "2", *WORKLOAD)
    assert job.returncode == 2 and "rocprof-compute cannot honour a job started by mpirun" in job.stderr


def test_rocprofv3_stays_first_where_both_are_installed(mi200):
    mi200.double("rocprofv3")
    done = cli(mi200, "counters", "--dry-run", "--", *WORKLOAD)
    assert "backend rocprofv3" in done.stdout
    forced = cli(mi200, "counters", "--dry-run", "--backend", "rocprof-compute", "--", *WORKLOAD)
    assert forced.returncode == 0 and "rocprof-compute analyze" in forced.stdout
    steps = cli(mi200, "counters", "--dry-run", "--backend", "rocprof-compute", "--steps", "2:4", "--", *WORKLOAD)
    assert steps.returncode == 2 and "rocprof-compute cannot honour --steps" in steps.stderr
