"""Report formats fit for users: the run's metadata in every format, human units in the formats
people read (raw numbers with unit-named columns in JSON and CSV), CSV that csv and polars parse,
and an HTML report that names only the fallbacks of the machine the run was made on."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from cli_support import WORKLOAD, amd_machine
from cli_support import cli as machine_cli
from fakes import FakeMachine
from profilectl import errors
from profilectl.model import units
from support import REPO

SECRET = "hunter2-secret-value"
RAW_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+\.\d")  # "51,821,441.0": a raw ns value printed as it is


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def every_format(path: Path, out: Path) -> dict[str, str]:
    """The report of `path` in each format, as text (csv: every table file, one after another)."""
    out.mkdir(parents=True, exist_ok=True)
    texts = {}
    for fmt in ("table", "md", "json"):
        done = cli("report", str(path), "--format", fmt)
        assert done.returncode == 0, done.stderr
        texts[fmt] = done.stdout
    done = cli("report", str(path), "--format", "html", "-o", str(out / "report.html"))
    assert done.returncode == 0, done.stderr
    texts["html"] = (out / "report.html").read_text()
    done = cli("report", str(path), "--format", "csv", "-o", str(out / "csv") + "/")
    assert done.returncode == 0, done.stderr
    texts["csv"] = "".join(f.read_text() for f in sorted((out / "csv").glob("*.csv")))
    return texts


@pytest.fixture(scope="module")
def amd_run(tmp_path_factory) -> Path:
    """A real trace run on a fake MI300X machine (ROCm 7.0.2, the rocprofv3 double), with a secret --env."""
    tmp = tmp_path_factory.mktemp("amd")
    machine = amd_machine(FakeMachine(tmp), tmp)
    done = machine_cli(machine, "trace", "--json", "--env", f"API_TOKEN={SECRET}", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["run_dir"])


def test_metadata_in_every_format_of_a_run(amd_run, tmp_path):
    manifest = json.loads((amd_run / "manifest.json").read_text())
    date = manifest["started_at"][:19].replace("T", " ")
    texts = every_format(amd_run, tmp_path)
    for fmt, text in texts.items():
        if fmt == "json":
            continue
        for expected in (date, "fakehost", "gfx942", "7.0.2", "rocprofv3", "profiling/workloads/matmul.py"):
            assert expected in text, (fmt, expected)
        assert SECRET not in text, fmt  # redacted as the manifest is
    meta = json.loads(texts["json"])["metadata"]
    assert (meta["host"], meta["rocm"], meta["tool"], meta["backend"]) == ("fakehost", "7.0.2", "rocprofv3", "rocprofv3")
    assert meta["started_at"] == manifest["started_at"] and "gfx942" in meta["gpu"]
    assert meta["command"] == manifest["workload"] and meta["profiler_command"][0].endswith("rocprofv3")
    assert SECRET not in texts["json"]
    rows = dict(csv.reader(io.StringIO((tmp_path / "csv/metadata.csv").read_text())))
    assert rows["key"] == "value" and rows["host"] == "fakehost" and rows["backend"].startswith("rocprofv3: ")


def test_metadata_of_a_bare_torch_trace(fixtures, tmp_path):
    """No manifest: the trace's own header says GPU, CUDA versions and when it began."""
    texts = every_format(fixtures / "nvidia-h200/torch_profiler_trace.json", tmp_path)
    for fmt, text in texts.items():
        for expected in ("NVIDIA H200", "sm_90", "13.0", "2026-11-21"):
            assert expected in text, (fmt, expected)
    meta = json.loads(texts["json"])["metadata"]
    # the capture was made at 23:11 UTC (nvidia-smi's clock in the fixture README's device files): its first event before
    assert meta["started_at"] == "2026-11-21T22:48:28Z" and meta["cuda"] == "13.0" and meta["host"] is None


def test_human_units_where_people_read_raw_numbers_where_programs_do(fixtures, tmp_path):
    trace = fixtures / "nvidia-h200/torch_profiler_trace.json"
    texts = every_format(trace, tmp_path)
    kernel = json.loads(texts["json"])["kernels"][0]
    assert isinstance(kernel["total_ns"], (int, float)) and kernel["total_ns"] > 1e6  # raw, in ns
    shown = units.duration_ns(kernel["total_ns"])
    assert shown.endswith(" ms")
    for fmt in ("table", "md", "html"):
        assert shown in texts[fmt], fmt
        assert not RAW_THOUSANDS.search(re.sub(r'title="[^"]*"', "", texts[fmt])), fmt
    with (tmp_path / "csv/kernels.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert float(rows[0]["total_ns"]) == kernel["total_ns"]


# One style (units.py): four significant digits with trailing zeros kept, whole nanoseconds, no separators
@pytest.mark.parametrize("value, text", [(51821441.0, "51.82 ms"), (999960.0, "1.000 ms"), (0, "0 ns"), (512.5, "512 ns"),
                                         (4740.0, "4.740 µs"), (191e6, "191.0 ms"), (190.64e6, "190.6 ms"),
                                         (12345e9, "12345 s"), (None, "–")])
def test_duration_units(value, text):
    assert units.duration_ns(value) == text


def test_timing_keeps_its_precision(tmp_path):
    done = cli("profile", "--json", "--repeat", "3", "--warmup", "0", "--traces-dir", str(tmp_path / "traces"), "--",
               sys.executable, "-c", "import time, random; time.sleep(0.01 + random.random() / 50)")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    std = result["summary"]["timing"]["std_s"]
    assert 0 < std < 0.1
    texts = every_format(Path(result["run_dir"]), tmp_path / "out")
    for fmt in ("table", "md", "html"):
        assert units.duration_s(std) in texts[fmt], fmt  # e.g. "6.152 ms", where the HTML said "0.0"
    assert ">0.0<" not in texts["html"]
    timing = list(csv.DictReader(io.StringIO((tmp_path / "out/csv/timing.csv").read_text())))
    assert float(timing[0]["std_s"]) == std  # CSV: raw seconds in a column named so
    stdout_csv = cli("report", result["run_dir"], "--format", "csv")  # no kernels: the timing table on stdout
    assert stdout_csv.stdout.splitlines()[0] == "runs,mean_s,median_s,p95_s,min_s,max_s,std_s"


def test_csv_is_one_table_per_file_parsed_by_csv_and_polars(fixtures, tmp_path):
    source = fixtures / "rocprofv3-docs"
    summary = json.loads(cli("report", str(source), "--format", "json").stdout)
    stdout = cli("report", str(source), "--format", "csv")
    assert stdout.returncode == 0 and "-o NAME.csv" in stdout.stderr
    rows = list(csv.DictReader(io.StringIO(stdout.stdout)))
    assert [r["name"] for r in rows] == [k["name"] for k in summary["kernels"]]
    frame = pl.read_csv(io.StringIO(stdout.stdout))
    assert frame.columns == ["name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "percent"]
    assert frame["total_ns"].to_list() == [k["total_ns"] for k in summary["kernels"]]

    done = cli("report", str(source), "--format", "csv", "-o", str(tmp_path / "run.csv"))
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in tmp_path.glob("run.*.csv"))
    # the docs' marker_api_trace.csv: its ROCTx ranges are the annotations table
    assert written == ["run.annotations.csv", "run.api.csv", "run.counters.csv", "run.hotspots.csv", "run.hta_idle.csv", "run.idle_causes.csv",
                       "run.idle_gaps.csv", "run.kernels.csv", "run.memory_copies.csv", "run.metadata.csv", "run.steady_state.csv",
                       "run.timeline.csv"]
    for path in tmp_path.glob("run.*.csv"):
        with path.open(newline="") as fh:
            parsed = list(csv.reader(fh))
        frame = pl.read_csv(path)
        assert len(parsed) - 1 == frame.height > 0 and parsed[0] == frame.columns, path.name
        assert len({len(row) for row in parsed}) == 1, path.name  # one table: every row as wide as the header
    counters = pl.read_csv(tmp_path / "run.counters.csv")
    assert counters["SQ_WAVES"][0] == summary["counters_by_kernel"][0]["SQ_WAVES"]
    timeline = pl.read_csv(tmp_path / "run.timeline.csv")
    assert timeline["busy_ns"][0] == summary["timeline"]["merged"]["busy_ns"]
    copies = pl.read_csv(tmp_path / "run.memory_copies.csv")
    assert set(copies["name"]) == {c["name"] for c in summary["memory_copies"]}


def test_csv_files_are_all_written_or_none(fixtures, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernels.csv").write_text("mine\n")
    done = cli("report", str(fixtures / "rocprofv3-docs"), "--format", "csv", "-o", str(out) + "/")
    assert done.returncode == errors.USAGE and "refusing to overwrite" in done.stderr
    assert [p.name for p in out.iterdir()] == ["kernels.csv"] and (out / "kernels.csv").read_text() == "mine\n"
    forced = cli("report", str(fixtures / "rocprofv3-docs"), "--format", "csv", "-o", str(out), "--force")
    assert forced.returncode == 0 and (out / "kernels.csv").read_text().startswith("name,calls,total_ns")


def test_reports_name_only_the_fallbacks_of_the_machine_they_ran_on(tmp_path):
    """An AMD machine without aqlprofile: counters fall back to profile; rocprofv3's refusal concerns this
    machine, ncu's "no NVIDIA GPU found" does not."""
    machine = FakeMachine(tmp_path)
    machine.kfd_gpu(1, 90402)
    machine.rocm("7.0.2", aqlprofile=None)
    machine.double("rocprofv3")
    done = machine_cli(machine, "counters", "--fallback", "--json", "--", sys.executable, "-c", "pass")
    result = json.loads(done.stdout)
    run = Path(result["run_dir"])
    assert {f["backend"] for f in result["manifest"]["fallbacks"]} >= {"rocprofv3", "ncu"}
    texts = every_format(run, tmp_path / "out")
    for fmt in ("table", "md", "html"):
        assert "libhsa-amd-aqlprofile64.so not found" in texts[fmt], fmt
        assert "no NVIDIA GPU found" not in texts[fmt], fmt
        assert "not considered on this machine: ncu" in texts[fmt], fmt
    assert "no NVIDIA GPU found" in texts["json"]  # the data keeps every fallback


def test_html_loads_nothing_from_the_network(amd_run, tmp_path):
    html = every_format(amd_run, tmp_path)["html"]
    assert not re.search(r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(" not in html and "<script" not in html


def test_metadata_of_a_slurm_job(tmp_path):
    """A job folder (profilectl as every task of a SLURM step): its first rank's run, every node."""
    def task(rank: int, node: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env.update(SLURM_JOB_ID="88", SLURM_STEP_ID="0", SLURM_PROCID=str(rank), SLURM_NTASKS="2",
                   SLURMD_NODENAME=node, SLURM_JOB_START_TIME="1795000000", PROFILECTL_JOB_WAIT_S="5")
        return subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "profile", "--repeat", "1", "--warmup",
                                 "0", "--traces-dir", str(tmp_path), "--", sys.executable, "-c", "pass"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [task(0, "nodeA"), task(1, "nodeB")]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    [job] = tmp_path.iterdir()
    meta = json.loads(cli("report", str(job), "--format", "json").stdout)["metadata"]
    assert meta["host"] == "nodeA, nodeB" and meta["source"] == "nodeA-rank0/manifest.json, env.json"
    assert meta["command"] == [sys.executable, "-c", "pass"] and meta["backend"] == "timing"
    assert "- **host**: nodeA, nodeB" in cli("report", str(job), "--format", "md").stdout


def test_a_broken_env_json_costs_its_facts_only(amd_run, tmp_path):
    import shutil
    run = tmp_path / amd_run.name
    shutil.copytree(amd_run, run)
    (run / "env.json").write_text('{"schema_version": 1, "host": []}')
    summary = json.loads(cli("report", str(run), "--format", "json").stdout)
    meta = summary["metadata"]
    assert meta["source"] == "manifest.json" and meta["rocm"] is None and meta["tool"] == "rocprofv3"
    assert "gfx942" in meta["gpu"]  # the manifest names the GPU the run used
    assert any(note.startswith("metadata: env.json left out:") and "env.json" in note for note in summary["notes"])
