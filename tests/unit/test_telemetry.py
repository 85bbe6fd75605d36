"""GPU power, memory and energy sampling (telemetry.csv) without a GPU: the real sampler and the real
CLI against doubles of the sources (tests/doubles: a `pynvml` and an `amdsmi` module put on
PYTHONPATH, `amd-smi` and `rocm-smi` executables on a fake machine's PATH), whose power follows a
known schedule and whose energy counters are its exact integral."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from cli_support import amd_machine, cli, json_run
from fakes import DOUBLES
from profilectl.report.power_chart import power_chart
from profilectl.telemetry.amdsmi import AmdSmiCommand
from profilectl.telemetry.energy import read_samples, step_energy, summarise_file
from profilectl.telemetry.model import CSV_COLUMNS, SamplingPlan, SourceSpec
from profilectl.telemetry.sampler import Sampler
from support import REPO

PYNVML = {"PYTHONPATH": str(DOUBLES / "lib-pynvml")}
AMDSMI = {"PYTHONPATH": str(DOUBLES / "lib-amdsmi")}
H100 = "0, NVIDIA H100 80GB HBM3, 81559, 9.0"


def write_csv(path: Path, rows: list[tuple]) -> Path:
    """rows: (seconds, gpu, power W or None, energy J or None, memory used bytes or None)."""
    lines = [",".join(CSV_COLUMNS)]
    for seconds, gpu, watts, joules, used in rows:
        t = int(round(seconds * 1e9))
        cells = [1_700_000_000_000_000_000 + t, 5_000_000_000 + t, gpu, "nvml", watts, joules, used, 80 * 2**30,
                 1980.0, 40.0, 97.0]
        lines.append(",".join("" if c is None else repr(c) if isinstance(c, float) else str(c) for c in cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def step_schedule(t: float) -> float:
    """The power the tests sample: 100 W, then 300 W from 1.05 s."""
    return 100.0 if t < 1.05 else 300.0


def step_energy_at(t: float) -> float:
    return 100.0 * min(t, 1.05) + 300.0 * max(0.0, t - 1.05)


def sampled_steps(tmp_path: Path, counter: bool = True) -> Path:
    """GPU 0 at 10 Hz for 2 s over the step schedule, with its energy counter (or without)."""
    rows = [(k / 10, 0, step_schedule(k / 10), step_energy_at(k / 10) + 5000.0 if counter else None,
             (1 + k) * 2**20) for k in range(21)]
    return write_csv(tmp_path / "telemetry.csv", rows)


# ------------------------------------------------------------------ energy from the samples
def test_energy_from_known_power_steps_is_exact(tmp_path):
    power = summarise_file(sampled_steps(tmp_path))
    assert power is not None and power.source == "nvml" and power.samples == 21
    assert power.duration_s == pytest.approx(2.0, abs=1e-12) and power.interval_s == pytest.approx(0.1, abs=1e-12)
    # the counter's delta is the exact integral: 100 W for 1.05 s, then 300 W for 0.95 s
    assert power.energy_method == "counter" and power.energy_j == pytest.approx(390.0, abs=1e-9)
    # the trapezoid rule sees the step between the samples at 1.0 s and 1.1 s as a ramp: 100 + 20 + 270
    assert power.trapezoid_energy_j == pytest.approx(390.0, abs=1e-9)
    assert power.avg_power_w == pytest.approx(195.0, abs=1e-9) and power.peak_power_w == 300.0
    assert power.peak_memory_bytes == 21 * 2**20 and power.gpus[0].memory_total_bytes == 80 * 2**30


def test_without_a_counter_the_trapezoid_rule_is_used_and_said(tmp_path):
    power = summarise_file(sampled_steps(tmp_path, counter=False))
    assert power is not None and power.energy_method == "trapezoid"
    assert power.energy_j == pytest.approx(100.0 * 1.0 + 200.0 * 0.1 + 300.0 * 0.9, abs=1e-9)


def test_several_gpus_add_up_and_a_counter_going_backwards_is_not_trusted(tmp_path):
    rows = []
    for k in range(11):
        rows.append((k / 10, 0, 200.0, 1000.0 + 200.0 * k / 10, 2**30))
        # GPU 1's counter restarts half way (a driver reload): its energy comes from the power samples
        rows.append((k / 10, 1, 100.0, (50.0 if k < 5 else 0.0) + 100.0 * k / 10, 3 * 2**30))
    power = summarise_file(write_csv(tmp_path / "telemetry.csv", rows))
    assert power is not None and [g.energy_method for g in power.gpus] == ["counter", "trapezoid"]
    assert power.energy_method == "mixed" and power.energy_j == pytest.approx(200.0 + 100.0, abs=1e-9)
    assert power.peak_power_w == 300.0 and power.peak_memory_bytes == 3 * 2**30  # the fullest GPU


def test_step_energy_integrates_the_power_between_the_marks(tmp_path):
    samples = list(read_samples(sampled_steps(tmp_path)))
    origin = samples[0].monotonic_ns
    second = 1_000_000_000
    steps = step_energy(samples, [(origin + second // 2, origin + 3 * second // 2),  # 0.5 s .. 1.5 s
                                  (origin + 3 * second, origin + 4 * second)])  # after the sampling ended
    # 100 W to 1.0 s, the ramp to 300 W at 1.1 s, 300 W to 1.5 s: 50 + 20 + 120 J over 1 s
    assert steps[0].energy_j == pytest.approx(190.0, abs=1e-9) and steps[0].avg_power_w == pytest.approx(190.0)
    assert steps[0].samples == 11 and steps[0].covered_s == pytest.approx(1.0)
    assert steps[1].energy_j == 0.0 and steps[1].covered_s == 0.0 and steps[1].samples == 0
    wall = samples[0].timestamp_ns  # the same step on the wall clock (a trace's step ranges)
    by_wall, = step_energy(samples, [(wall + second // 2, wall + 3 * second // 2)], clock="wall")
    assert by_wall.energy_j == pytest.approx(190.0, abs=1e-9)


def test_a_row_cut_short_by_a_crash_is_left_out(tmp_path):
    path = sampled_steps(tmp_path)
    with open(path, "a") as fh:
        fh.write("1700000002100000000,5002100000000,0,nvml,300.0,59")  # no newline: profilectl was killed
    assert len(list(read_samples(path))) == 21


def test_power_chart_is_one_svg_of_at_most_300_points_per_gpu(tmp_path):
    rows = [(k / 10, gpu, 100.0 + gpu * 50 + (k % 7), None, None) for k in range(5000) for gpu in (0, 1)]
    power = summarise_file(write_csv(tmp_path / "telemetry.csv", rows))
    assert power is not None and all(0 < len(g.series) <= 300 for g in power.gpus)
    svg = power_chart(power)
    root = ElementTree.fromstring(svg)  # well-formed, self-contained XML
    lines = [e for e in root.iter() if e.tag.endswith("polyline")]
    assert len(lines) == 2 and all(len(e.get("points", "").split()) <= 300 for e in lines)
    assert power_chart(None) == ""


# ------------------------------------------------------------------ the sampler in this process
def test_sampler_stops_its_thread_and_kills_a_command_under_way(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    os.environ.update(FAKE_SMI_STATE=str(state), FAKE_SMI_SLEEP="30")
    try:
        plan = SamplingPlan(sources=(SourceSpec("amd-smi", str(DOUBLES / "amd-smi")),), vendor="amd")
        sampler = Sampler.start(plan, tmp_path)
        deadline = time.monotonic() + 20
        while len((state / "calls").read_text().split()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the second call (30 s long) is under way
        started = time.monotonic()
        sampler.stop()
        assert time.monotonic() - started < 5
    finally:
        for name in ("FAKE_SMI_STATE", "FAKE_SMI_SLEEP"):
            os.environ.pop(name, None)
    assert not [t for t in threading.enumerate() if t.name == "profilectl-sampler"]
    assert not alive((state / "calls").read_text().split())
    assert (tmp_path / "telemetry.csv").read_text().splitlines()[0] == ",".join(CSV_COLUMNS)
    assert not sampler.notes  # a call ended by stop() is not a failure


def test_amd_smi_newer_layout_and_energy_in_joules(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AMD_SMI_LAYOUT", "gpu_data")
    monkeypatch.setenv("FAKE_SMI_GPUS", "2")
    source = AmdSmiCommand("amd-smi", str(DOUBLES / "amd-smi"), gpus=(1,))
    source.open()
    reading, = source.read()
    assert reading.gpu == 1 and reading.power_w == 260.0 and reading.memory_used_bytes == 2 * 2**30
    assert reading.sm_clock_mhz == 2100.0 and reading.temperature_c == 56.0 and reading.utilization_pct == 97.0
    assert reading.energy_j is not None and reading.energy_j > 0
    assert "-E" in source.argv and source.argv[-2:] == ["-g", "1"]


def alive(pids: list[str]) -> list[str]:
    """The pids still running (not zombies)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            running.append(pid)
    return running


def complete_rows(path: Path) -> list[list[str]]:
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS)
    rows = [line.split(",") for line in lines[1:]]
    assert rows and all(len(row) == len(CSV_COLUMNS) for row in rows)
    return rows


# ------------------------------------------------------------------ through the CLI
def report(run: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(run), *args],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="160"))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def nvidia(machine):
    machine.nvidia(H100)
    return machine


def test_profile_samples_every_gpu_into_telemetry_csv_and_the_summary(nvidia):
    result, run = json_run(nvidia, "profile", "--repeat", "2", "--warmup", "0", "--", "sleep", "0.6",
                           extra_env={**PYNVML, "FAKE_NVML_GPUS": "2", "FAKE_NVML_INSTANT": "1"})
    assert result["status"] == "ok", result["message"]
    rows = complete_rows(run / "telemetry.csv")
    assert {row[2] for row in rows} == {"0", "1"} and {row[3] for row in rows} == {"nvml"}
    power = json.loads((run / "summary.json").read_text())["power"]
    assert power["source"] == "nvml" and power["energy_method"] == "counter"
    assert power["power_reading"].startswith("instantaneous")
    assert power["avg_power_w"] == pytest.approx(250.0 + 260.0, rel=0.02) and power["peak_power_w"] == 510.0
    assert power["energy_j"] == pytest.approx(510.0 * power["duration_s"], rel=0.02)
    assert power["duration_s"] > 1.0 and power["interval_s"] == pytest.approx(0.1, abs=0.03)
    assert power["peak_memory_bytes"] == 2 * 2**30
    assert any(n.startswith("power sampling: nvml") for n in result["manifest"]["notes"])
    assert "telemetry.csv" in {o["path"] for o in result["manifest"]["outputs"]}
    shown = report(run)
    assert "GPU power (nvml, 2 GPUs" in shown and "GPU power per GPU" in shown
    assert "## GPU power and energy" in report(run, "--format", "md")
    # a run whose summary was lost: the report rebuilds the power from telemetry.csv
    (run / "summary.json").unlink()
    rebuilt = json.loads(report(run, "--format", "json"))["power"]
    assert rebuilt["energy_j"] == pytest.approx(power["energy_j"]) and rebuilt["samples"] == power["samples"]


STEP_LOOP = f"""
import sys, time
sys.path.insert(0, {str(REPO / 'src')!r})
import profilectl
time.sleep(0.3)
for i in range(12):
    time.sleep(0.15)
    profilectl.step()
"""


def test_energy_per_step_integrates_the_power_between_the_step_marks(nvidia, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(STEP_LOOP)
    result, run = json_run(nvidia, "profile", "--repeat", "1", "--warmup", "0", "--", sys.executable, str(script),
                           extra_env={**PYNVML, "FAKE_NVML_GPUS": "2"})
    assert result["status"] == "ok", result["message"]
    power = result["summary"]["power"]
    steps = power["steps"]
    assert len(steps) == result["summary"]["step_time"]["steps"] == 12 - 1 - 2  # 11 intervals, 2 warm-up
    for step in steps:  # the fake GPUs draw 250 W and 260 W all along
        seconds = (step["end_ns"] - step["start_ns"]) / 1e9
        assert step["covered_s"] == pytest.approx(seconds) and 0.15 <= seconds < 0.3
        assert step["energy_j"] == pytest.approx(510.0 * seconds, rel=1e-6) and step["avg_power_w"] == pytest.approx(510.0)
    shown = report(run)
    assert "energy per step (9 steady steps): median" in shown and "median power 510.0 W" in shown
    html = report(run, "--format", "html")
    assert ">GPU power and energy</h2>" in html and "<title>GPU power over time (nvml)</title>" in html
    csv_dir = tmp_path / "csv"
    report(run, "--format", "csv", "-o", f"{csv_dir}/")
    assert (csv_dir / "step_energy.csv").read_text().splitlines()[0].startswith("start_ns,end_ns,energy_j")
    assert len((csv_dir / "power.csv").read_text().splitlines()) == 3  # header, GPU 0, GPU 1


def test_a_sampler_failing_mid_run_keeps_the_run_and_a_note(nvidia):
    result, run = json_run(nvidia, "profile", "--repeat", "1", "--warmup", "0", "--", "sleep", "2",
                           extra_env={**PYNVML, "FAKE_NVML_FAIL_AFTER": "6"})
    assert result["status"] == "ok" and result["exit_code"] == 0, result["message"]
    notes = [n for n in result["manifest"]["notes"] if n.startswith("power sampling stopped after")]
    assert len(notes) == 1 and notes[0].endswith("NVML: GPU is lost"), result["manifest"]["notes"]
    assert notes[0] in result["summary"]["notes"]
    rows = complete_rows(run / "telemetry.csv")  # the sweeps before the GPU was lost (6 power readings)
    assert 0 < len(rows) < 6 and result["summary"]["power"]["samples"] == len(rows)


def test_no_sample_turns_it_off_and_the_plan_says_so(nvidia):
    planned = json.loads(cli(nvidia, "profile", "--dry-run", "--json", "--", "sleep", "1", extra_env=PYNVML).stdout)
    assert planned["sampling"]["sources"] == [{"name": "nvml", "path": None}]
    assert planned["request"]["sample"] is True
    off = json.loads(cli(nvidia, "trace", "--no-sample", "--dry-run", "--json", "--", "sleep", "1",
                         extra_env=PYNVML).stdout)
    assert off["sampling"] is None and "no power sampling (--no-sample)" in off["notes"]
    result, run = json_run(nvidia, "profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--", "true",
                           extra_env=PYNVML)
    assert result["status"] == "ok" and not (run / "telemetry.csv").exists() and result["summary"]["power"] is None


def test_without_a_source_nothing_is_sampled_and_only_the_plan_says_why(machine):
    result, run = json_run(machine, "profile", "--repeat", "1", "--warmup", "0", "--", "true", extra_env=PYNVML)
    assert result["status"] == "ok" and not (run / "telemetry.csv").exists()
    # no GPU: nothing to sample, and nothing said about it (the machine says it)
    assert [n for n in result["manifest"]["notes"] if "power sampling" in n] == []
    machine.kfd_gpu(1, 90402)  # an AMD GPU without amdsmi, amd-smi or rocm-smi
    result, run = json_run(machine, "profile", "--repeat", "1", "--warmup", "0", "--", "true", extra_env=PYNVML)
    assert [n for n in result["manifest"]["notes"] if "power sampling" in n][0].startswith(
        "no power sampling: no AMD telemetry source here")
    assert not (run / "telemetry.csv").exists()


def test_amd_library_first_then_amd_smi_then_rocm_smi(machine, tmp_path):
    amd = amd_machine(machine, tmp_path)
    amd.double("amd-smi")
    amd.double("rocm-smi")
    state = tmp_path / "state"
    state.mkdir()
    workload = ("--repeat", "1", "--warmup", "0", "--", "sleep", "1.5")
    result, run = json_run(amd, "profile", *workload, extra_env={**AMDSMI, "FAKE_SMI_STATE": str(state)})
    power = result["summary"]["power"]
    assert power["source"] == "amdsmi" and power["energy_method"] == "counter", result["manifest"]["notes"]
    assert power["avg_power_w"] == pytest.approx(250.0, rel=0.02) and not (state / "calls").exists()
    # no library: amd-smi, whose -E is refused off bare metal (energy then from the power samples)
    result, run = json_run(amd, "profile", *workload, extra_env={"FAKE_AMD_SMI_NO_ENERGY": "1"})
    power = result["summary"]["power"]
    assert power["source"] == "amd-smi" and power["energy_method"] == "trapezoid", result["manifest"]["notes"]
    assert power["avg_power_w"] == pytest.approx(250.0) and power["peak_memory_bytes"] == 2**30
    (amd.bin / "amd-smi").unlink()
    result, run = json_run(amd, "profile", *workload)
    power = result["summary"]["power"]
    assert power["source"] == "rocm-smi" and power["energy_method"] == "counter", result["manifest"]["notes"]
    assert power["gpus"][0]["peak_temperature_c"] == 55.0 and power["gpus"][0]["max_sm_clock_mhz"] == 2100.0


def test_a_timeout_leaves_a_complete_csv_and_no_sampling_process(machine, tmp_path):
    amd = amd_machine(machine, tmp_path)
    amd.double("rocm-smi")
    state = tmp_path / "state"
    state.mkdir()
    result, run = json_run(amd, "profile", "--timeout", "3", "--repeat", "1", "--warmup", "0", "--", "sleep", "60",
                           extra_env={"FAKE_SMI_STATE": str(state), "FAKE_SMI_SLEEP": "0.4"})
    assert result["status"] == "timeout" and result["exit_code"] == 124
    assert len(complete_rows(run / "telemetry.csv")) >= 1
    assert not alive((state / "calls").read_text().split())


@pytest.mark.parametrize("source", ["nvml", "rocm-smi"])
def test_sigterm_leaves_a_complete_csv_and_no_sampling_process(machine, tmp_path, source):
    state = tmp_path / "state"
    state.mkdir()
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), FAKE_SMI_STATE=str(state), FAKE_SMI_SLEEP="0.3")
    if source == "nvml":
        machine.nvidia(H100)
        env.update(PYNVML)
    else:
        amd_machine(machine, tmp_path).double("rocm-smi")
    env["PATH"] = machine.path_with_bin()
    traces = machine.root.parent / "traces"
    process = subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "profile", "--traces-dir", str(traces),
                                "--repeat", "1", "--warmup", "0", "--", "sleep", "60"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = list(traces.glob("*/telemetry.csv"))
        if found and len(found[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 130
    run = next(traces.glob("*/manifest.json")).parent
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    rows = complete_rows(run / "telemetry.csv")
    assert {row[3] for row in rows} == {source}
    assert json.loads((run / "summary.json").read_text())["power"]["samples"] == len(rows)
    if (state / "calls").exists():
        assert not alive((state / "calls").read_text().split())


def can_mount_tmpfs() -> bool:
    """Root, and the kernel lets this process mount (not a container without CAP_SYS_ADMIN)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(f"/tmp/profilectl-telemetry-mount-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
        subprocess.run(["umount", str(probe)], capture_output=True)
        return done.returncode == 0
    finally:
        probe.rmdir()


@pytest.mark.skipif(not can_mount_tmpfs(), reason="a small tmpfs needs root with mount rights (CAP_SYS_ADMIN)")
def test_a_full_disk_stops_the_sampling_with_complete_rows_and_a_note(tmp_path, monkeypatch):
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        monkeypatch.syspath_prepend(str(DOUBLES / "lib-pynvml"))
        sys.modules.pop("pynvml", None)
        monkeypatch.setenv("FAKE_NVML_GPUS", "8")
        sampler = Sampler.start(SamplingPlan(sources=(SourceSpec("nvml"),), vendor="nvidia", interval_s=0.001), mount)
        deadline = time.monotonic() + 30
        while sampler.running and time.monotonic() < deadline:
            time.sleep(0.05)
        power = sampler.stop()
        assert any(n.startswith("power sampling stopped after") and "the disk is full" in n for n in sampler.notes)
        rows = complete_rows(mount / "telemetry.csv")
        assert len(rows) % 8 == 0 and power is not None and power.samples == len(rows)  # whole sweeps only
    finally:
        sys.modules.pop("pynvml", None)
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
