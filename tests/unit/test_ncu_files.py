"""Nsight Compute's CSV as users really have it: redirected (`ncu --csv ... > out.csv`, ncu's own
lines and the program's output among the CSV), the details page of a --section run (display names
with their units), the raw page, and `.ncu-rep` reports through `ncu --import`.

Real files: a redirected `ncu --section ... --csv` run of a cuBLASLt GEMM on a B200 (microsoft/
superbenchmark's tests/data/cublaslt_ncu.log) and the raw page of the SpeedOfLight sections on an
H100 (tests/fixtures/nvidia-h100-roofline); provenance in tests/fixtures/README.md. Expected values
are read from the files here with csv and Decimal, not by profilectl."""

import csv
import json
import os
import subprocess
import sys
from decimal import Decimal

import pytest

from profilectl import countersets
from profilectl.backends import READERS
from profilectl.formats import ncu
from profilectl.formats.reader import read_path, recognised
from support import FIXTURES, REPO

SUPERBENCH = FIXTURES / "nvidia-b200-superbench" / "cublaslt_ncu.log"
RAW = FIXTURES / "nvidia-h100-roofline" / "ncu_sections_raw.csv"


def rows_of(path):
    lines = [line.rstrip("\n") for line in path.read_text().splitlines() if line.startswith('"')]
    header = next(csv.reader([lines[0]]))
    return [dict(zip(header, next(csv.reader([line])))) for line in lines[1:]]


def report(path, env=None):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_redirected_details_page_is_recognised_past_ncus_and_the_programs_lines(tmp_path):
    text = SUPERBENCH.read_text()
    assert text.startswith("==PROF== Connected") and "\n2208    2048    5608" in text  # the program's own line
    out = tmp_path / "out.csv"  # as users name it
    out.write_text(text)
    for path in (SUPERBENCH, out):
        (reader, _), = recognised(path, READERS)
        assert reader.kind == "ncu-csv"
    launch, = ncu.launches(out)
    expected = {r["Metric Name"]: float(r["Metric Value"].replace(",", "")) for r in rows_of(SUPERBENCH)
                if r["Metric Name"] and r["Metric Value"].replace(",", "").replace(".", "", 1).isdigit()}
    assert {metric: value for metric, (value, _unit) in launch.values.items()} == expected
    assert launch.duration_ns == 406_240  # "Duration", unit ns, of the SpeedOfLight section


def test_tool_lines_among_the_rows_are_left_out(tmp_path):
    """ncu writes ==PROF==/==WARNING==/==ERROR== lines where it is, the CSV's header repeated per
    process: all left out, and a row cut short is still an error naming its line."""
    lines = RAW.read_text().splitlines()
    mixed = lines[:3] + ["==WARNING== Found outstanding GPU clock reset, trying to revert...", "some program output"] \
        + lines[3:5] + ["==ERROR== An error was reported by the driver", lines[2]] + lines[5:]
    path = tmp_path / "out.csv"
    path.write_text("\n".join(mixed) + "\n")
    assert [(l.kernel, l.values) for l in ncu.launches(path)] == [(l.kernel, l.values) for l in ncu.launches(RAW)]
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:5] + [lines[5][:40]]) + "\n")
    from profilectl.errors import FormatError
    with pytest.raises(FormatError, match=r"cut.csv:6: truncated or malformed row"):
        ncu.launches(cut)


def test_the_raw_page_is_read_and_each_kernel_placed_by_speed_of_light():
    """Before: "no profiler output recognised". The known answers of the roofline test on the same
    run: the vector add memory-bound on HBM, the BF16 GEMM compute-bound, t *= 1.0001 on 256 floats
    under both roofs."""
    rows = rows_of(RAW)[1:]  # the units row first
    durations: dict[str, int] = {}
    for r in rows:
        durations[r["Kernel Name"]] = durations.get(r["Kernel Name"], 0) + int(r["gpu__time_duration.sum"].replace(",", ""))
    tables = read_path(RAW, READERS)
    assert {k: int(s.total) for k, s in tables.kernels.items()} == durations
    found = report(RAW)
    verdicts = {k["kernel"]: (k["verdict"], k["bound_by"]) for k in found["roofline"]["kernels"]}
    gemm = next(v for k, v in verdicts.items() if k.startswith("nvjet"))
    add = next(v for k, v in verdicts.items() if "CUDAFunctor_add" in k)
    tiny = next(v for k, v in verdicts.items() if "MulFunctor" in k)
    assert (gemm, add, tiny[0]) == (("compute-bound", "sol_compute"), ("memory-bound", "hbm"), "latency-bound")


def test_the_details_page_verdict_is_ncus_own():
    """The B200 GEMM's SpeedOfLight throughputs are all below 60 %: latency-bound, which is what
    ncu's own SOLBottleneck rule row in the same file says."""
    rule = next(r for r in rows_of(SUPERBENCH) if r.get("Rule Name") == "SOLBottleneck")
    assert "below 60.0% of peak typically indicate latency issues" in rule["Rule Description"]
    kernel, = report(SUPERBENCH)["roofline"]["kernels"]
    assert kernel["verdict"] == "latency-bound" and kernel["compute_percent"] == pytest.approx(23.59)


def _two_launches(tmp_path):
    """The real B200 details page with its launch repeated as launch 1 at other values (its
    Duration doubled, every percentage and clock changed): what aggregation over launches meets."""
    lines = SUPERBENCH.read_text().splitlines()
    second = []
    for line in lines:
        if not line.startswith('"0",'):
            continue
        fields = next(csv.reader([line]))
        name, unit = fields[12], fields[13]
        if name == "Duration":
            fields[14] = str(2 * int(fields[14]))
        elif unit in ("%", "hz"):
            fields[14] = f"{float(fields[14].replace(',', '')) / 2:.2f}"
        fields[0] = "1"
        second.append(",".join(f'"{f}"' for f in fields[:15]) + ",")
    path = tmp_path / "two.csv"
    path.write_text("\n".join(lines + second) + "\n")
    return path


def test_each_metric_is_aggregated_by_its_kind(tmp_path):
    """Counts summed; percentages and clocks averaged, weighted by each launch's duration; launch
    properties averaged: never a percentage or a clock summed over launches (before, the details
    page's display names went by AMD's rules: "Memory Throughput" and "SM Frequency" were summed)."""
    path = _two_launches(tmp_path)
    first = {r["Metric Name"]: r for r in rows_of(SUPERBENCH) if r["Metric Name"]}
    d1, d2 = 406_240, 812_480
    row, = report(path)["counters_by_kernel"]

    def weighted(name):
        v1 = Decimal(first[name]["Metric Value"].replace(",", ""))
        v2 = Decimal(f"{float(v1) / 2:.2f}")
        return float((v1 * d1 + v2 * d2) / (d1 + d2))
    for name in ("Memory Throughput", "Compute (SM) Throughput", "DRAM Throughput", "SM Frequency", "DRAM Frequency"):
        assert row[name] == pytest.approx(weighted(name), rel=1e-9), name
    assert row["Duration"] == d1 + d2
    assert row["Elapsed Cycles"] == 2 * 508_757  # a count: summed
    assert row["Block Size"] == 384 and row["# SMs"] == 152 and row["Waves Per SM"] == pytest.approx(1.89)


@pytest.mark.parametrize("name, unit, rule", [
    ("Memory Throughput", "%", "mean"), ("SM Frequency", "hz", "mean"), ("SM Frequency", "Ghz", "mean"),
    ("SM Frequency", "cycle/nsecond", "mean"), ("DRAM Frequency", "Mhz", "mean"), ("Duration", "usecond", "sum"),
    ("Elapsed Cycles", "cycle", "sum"), ("Block Size", "", "mean"), ("Block Limit Registers", "block", "mean"),
    ("Achieved Active Warps Per SM", "warp", "mean"), ("Registers Per Thread", "register/thread", "mean"),
    ("SQ_WAVES", "", "sum"), ("OccupancyPercent", "", "mean"),  # AMD's, unchanged
])
def test_details_page_names_by_kind(name, unit, rule):
    assert countersets.aggregation(name, unit) == rule


def test_an_ncu_rep_is_read_through_ncu_import(machine, tmp_path):
    machine.double("ncu")
    report_file = tmp_path / "run" / "profile.ncu-rep"
    report_file.parent.mkdir()
    report_file.write_bytes(b"NVIDIA Nsight Compute report (the double prints its raw page)")
    env = dict(os.environ, PATH=machine.path_with_bin(), FAKE_NCU_RAW=str(RAW), FAKE_NCU_LOG=str(tmp_path / "log"))
    found = report(report_file.parent, env)
    assert {k["name"]: k["total_ns"] for k in found["kernels"]} == {
        k: int(s.total) for k, s in read_path(RAW, READERS).kernels.items()}
    assert any("read through `ncu --import profile.ncu-rep --csv --page raw`" in n for n in found["notes"])
    logged = [json.loads(line)["argv"] for line in (tmp_path / "log").read_text().splitlines()]
    assert logged == [["--import", str(report_file), "--csv", "--page", "raw"]]
    # without ncu: one line, exit 3 (the capability is not here)
    bare = dict(os.environ, PATH="/usr/bin:/bin")
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(report_file)],
                          capture_output=True, text=True, timeout=120, env=bare)
    assert done.returncode == 3 and "ncu is not on PATH" in done.stderr and len(done.stderr.strip().splitlines()) == 1
