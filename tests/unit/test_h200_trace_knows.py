"""Known-answer runs on 2 NVIDIA H200s (bench/nvidia_trace_knows.sh, PyTorch 2.11, ncu 2025.3.1,
2026-11-27; tests/fixtures/nvidia-h200-knows, provenance in tests/fixtures/README.md). Each folder
keeps what the workload printed of itself (script_prints.txt: the FLOP it asked for, what
torch.cuda.max_memory_allocated() said, the bytes it sent): the answers, from the script, not from
profilectl."""

import json
import subprocess
import sys

import pytest

from support import FIXTURES, REPO

RUNS = FIXTURES / "nvidia-h200-knows"


def report(folder):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(RUNS / folder), "--format",
                           "json"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def prints(folder, tag):
    return [line.split(tag, 1)[1].strip() for line in (RUNS / folder / "script_prints.txt").read_text().splitlines()
            if line.startswith(tag)]


def operator_rows():
    found = report("gemm")
    section = next(s for s in found["sections"] if s["key"] == "operator_roofline")
    return section["tables"][0]["rows"]


def test_each_gemms_flop_from_its_shapes_is_what_the_script_computed():
    asked = {d["operator"]: d for d in map(json.loads, prints("gemm", "KNOWS_GEMM"))}
    rows = {r["operator"]: r for r in operator_rows()}
    assert {name: (rows[name]["flop"] / rows[name]["calls"], rows[name]["calls"]) for name in asked} == \
        {name: (d["flop_per_call"], d["calls"]) for name, d in asked.items()}


def test_the_shapes_roofline_agrees_with_nsight_compute_on_the_same_kernels():
    """Per kernel (cuBLAS ran aten::mm and aten::bmm on one kernel, so ncu's figures for it are over both):
    FLOP per launch equal, FLOP/s within 10 % (trace time against ncu's replay, clocks left free)."""
    counted = {k["kernel"]: k for k in report("ncu")["roofline"]["kernels"]}
    by_kernel: dict[str, list] = {}
    for row in operator_rows():
        by_kernel.setdefault(row["kernel"], []).append(row)
    assert set(by_kernel) == set(counted)
    for kernel, rows in by_kernel.items():
        flop, launches = sum(r["flop"] for r in rows), sum(r["launches"] for r in rows)
        seconds = sum(r["flop"] / r["flop_per_s"] for r in rows)
        ncu = counted[kernel]
        assert launches == ncu["calls"]
        assert flop / launches == pytest.approx(ncu["flop"] / ncu["calls"], rel=1e-9)
        assert flop / seconds == pytest.approx(ncu["flop_per_s"], rel=0.10)


def test_the_memory_peak_is_torchs_max_memory_allocated_and_names_what_held_it():
    asked = int(prints("memory", "KNOWS_MAX_ALLOCATED")[0])
    memory, = report("memory")["memory"]
    assert memory["peak_allocated"] == asked == memory["torch_max_allocated"]
    held = {c["category"] for c in memory["by_category"]}
    assert {"parameters", "optimizer state", "gradients"} <= held


def test_out_of_memory_is_told_with_the_allocation_that_failed_and_where():
    asked = int(prints("oom", "KNOWS_OOM_ASKED")[0])
    failures = [m["failure"] for m in report("oom")["memory"] if m["failure"]]
    assert failures, "no out-of-memory failure read"
    failure = failures[0]
    assert failure["requested"] == asked and failure["requested_by"].startswith("knows_memory.py:30")


def test_nccl_collectives_have_the_sizes_the_script_sent_and_the_sleeping_rank_arrives_last():
    sent = [json.loads(line) for line in prints("nccl", "KNOWS_SENT")]
    calls = report("nccl")["collective_calls"]
    kinds = {k["kind"]: k for k in calls["kinds"]}
    for s in sent:
        assert (kinds[s["kind"]]["bytes"], kinds[s["kind"]]["dtype"], kinds[s["kind"]]["calls"]) == \
            (s["bytes"], s["dtype"], s["calls"] * s["ranks"]), s
    last = max(calls["last_arrivals"], key=lambda r: r["last"])
    assert last["rank"] == sent[0]["slow_rank"] and last["last"] > last["calls"] / 2


def test_gloo_on_cpu_tensors_reads_as_a_cpu_workload():
    """torch 2.11 writes no record_param_comms for gloo on CPU tensors: no per-call sizes, said plainly;
    the ranks' gloo ranges are still there."""
    found = report("gloo")
    assert found["collective_calls"] is None
    names = {a["name"] for a in found["annotations"]}
    assert {"gloo:all_reduce", "gloo:broadcast"} <= names
