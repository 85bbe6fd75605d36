"""A known-answer Nsight Compute run on an H200 (bench/nvidia_ncu_redirect.sh, ncu 2025.3.1, torch
2.11): bench/workloads/roofline_kernels.py launches a memory-bound vector add, a compute-bound bf16
GEMM and a 256-float `t *= 1.0001` (latency-bound), each twice, and prints lines of its own. The
details page was redirected as users do (`ncu --section ... --csv python3 ... > details.csv`: ncu's
==PROF== and ==WARNING== lines and the program's prints among the rows), the raw page of a second
run likewise. Expected values are read from the files with csv, not by profilectl."""

import csv
import json
import subprocess
import sys

import pytest

from support import FIXTURES, REPO

RUN = FIXTURES / "nvidia-h200-ncu-redirect"


def rows_of(path):
    lines = [line for line in path.read_text().splitlines() if line.startswith('"')]
    header = next(csv.reader([lines[0]]))
    return [dict(zip(header, next(csv.reader([line])))) for line in lines[1:]]


def report(path):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def verdicts(found):
    by_name = {k["kernel"]: k for k in found["roofline"]["kernels"]}
    pick = {"gemm": "nvjet", "add": "CUDAFunctor_add", "tiny": "MulFunctor"}
    return {role: next(v for name, v in by_name.items() if part in name) for role, part in pick.items()}


def test_the_redirected_details_page_has_the_programs_and_ncus_lines_among_its_rows():
    text = (RUN / "details.csv").read_text()
    assert "workload: starting" in text and "==PROF== Connected" in text and "==WARNING==" in text


def test_each_kernels_time_is_its_launches_durations_summed():
    durations: dict[str, int] = {}
    launches: dict[str, set[str]] = {}
    for r in rows_of(RUN / "details.csv"):
        if r["Metric Name"] == "Duration":
            assert r["Metric Unit"] == "ns"
            durations[r["Kernel Name"]] = durations.get(r["Kernel Name"], 0) + int(r["Metric Value"].replace(",", ""))
            launches.setdefault(r["Kernel Name"], set()).add(r["ID"])
    found = report(RUN / "details.csv")
    assert {k["name"]: k["total_ns"] for k in found["kernels"]} == durations
    assert {k["name"]: k["calls"] for k in found["kernels"]} == {k: len(v) for k, v in launches.items()}
    assert found["totals"]["dispatches"] == 11


@pytest.mark.parametrize("page", ["details.csv", "raw.csv"])
def test_the_known_answers_from_either_page(page):
    """GEMM compute-bound near its roof, the add memory-bound, the tiny kernel under both roofs."""
    found = verdicts(report(RUN / page))
    assert found["gemm"]["verdict"] == "compute-bound" and found["gemm"]["compute_percent"] > 85
    assert found["add"]["verdict"] == "memory-bound" and found["add"]["roof_percent"] > 80
    assert found["tiny"]["verdict"] == "latency-bound" and found["tiny"]["roof_percent"] < 5
