"""The roofline (issue 22) on real captures: an H100 running a memory-bound add, a compute-bound bf16
GEMM and a latency-bound tiny kernel under `profilectl counters --set roofline`, checked against
Nsight Compute's own sections for the same launches; rocprofiler-compute's MI200 and MI300X captures
for the AMD byte formulas (numbers worked by hand); and the counter names against real listings."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from cli_support import WORKLOAD, amd_machine, cli
from profilectl import countersets
from profilectl.analysis import roofline
from profilectl.formats.ncu import NcuCsvReader
from profilectl.read.summary import SourceInfo, Summary, build
from support import FIXTURES

H100 = FIXTURES / "nvidia-h100-roofline"
ROCPROF_COMPUTE = FIXTURES / "rocprofiler-compute"
ADD, GEMM, TINY = "CUDAFunctor_add", "nvjet_sm90", "MulFunctor"


def kernel(result, needle):
    return next(k for k in result.kernels if needle in k.kernel)


@pytest.fixture(scope="module")
def h100() -> Summary:
    tables = NcuCsvReader().read_file(H100 / "roofline_ncu_metrics.csv")
    return build(tables, SourceInfo(kind="ncu-csv", path=str(H100)), countersets.load("roofline", "nvidia", "sm_90").derived)


def nsight(needle: str) -> dict[str, float]:
    """Nsight Compute's own numbers for a kernel (its sections' metrics, mean over its launches)."""
    lines = [line for line in (H100 / "ncu_sections_raw.csv").read_text().splitlines() if not line.startswith("==")]
    rows = list(csv.reader(lines))
    header = rows[0]
    launches = [dict(zip(header, r)) for r in rows[2:] if needle in r[header.index("Kernel Name")]]

    def mean(metric: str) -> float:
        return statistics.fmean(float(r[metric].replace(",", "")) for r in launches)
    return {"dram_per_s": mean("dram__bytes.sum.per_second"),
            "dram_percent": mean("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
            "tensor_per_s": mean("sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second"),
            "tensor_percent": mean("sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum."
                                   "pct_of_peak_sustained_elapsed"),
            "sm_percent": mean("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            "memory_percent": mean("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")}


# ------------------------------------------------------------------ NVIDIA: the three kernels
def test_each_kernels_verdict_is_the_known_answer(h100):
    result = h100.roofline
    assert result is not None
    add, gemm, tiny = kernel(result, ADD), kernel(result, GEMM), kernel(result, TINY)
    assert (add.verdict, add.bound_by) == ("memory-bound", "hbm")
    assert (gemm.verdict, gemm.bound_by) == ("compute-bound", "matrix_bf16")
    assert tiny.verdict == "latency-bound"
    assert "HBM 3.05 TB/s = 91 % of 3.35 TB/s" == add.carrying
    assert gemm.carrying.startswith("BF16 matrix 731 TFLOP/s = 94 % of")
    # under both roofs, with occupancy and waves beside: one block of 256 elements on 132 SMs
    assert tiny.occupancy_percent is not None and tiny.occupancy_percent < 10 and tiny.waves == 0.0
    assert "occupancy 6 %" in tiny.carrying


def test_kernels_are_ordered_by_their_share_of_gpu_time(h100):
    shares = [k.share_percent for k in h100.roofline.kernels]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 100.0) < 1e-6
    assert GEMM in h100.roofline.kernels[0].kernel  # 52 % of GPU time


def test_bandwidth_and_flops_agree_with_nsight_computes_own_sections(h100):
    """Same launches, separate replays: within 1 % for the big kernels; the 3 µs kernel within 7 %
    (ncu prints per-cycle rates rounded to two digits)."""
    add, gemm, tiny = (kernel(h100.roofline, n) for n in (ADD, GEMM, TINY))
    theirs = nsight(ADD)
    assert add.rate_at("hbm") == pytest.approx(theirs["dram_per_s"], rel=0.01)
    assert add.percent_at("hbm") == pytest.approx(theirs["dram_percent"], abs=1.0)
    theirs = nsight(GEMM)
    gemm_rate = dict(gemm.work)["matrix_bf16"] / (gemm.total_ns / 1e9)
    assert gemm_rate == pytest.approx(theirs["tensor_per_s"], rel=0.01)
    assert gemm.compute_percent == pytest.approx(theirs["tensor_percent"], abs=1.0)  # 93.9 % both
    assert gemm.rate_at("hbm") == pytest.approx(theirs["dram_per_s"], rel=0.01)
    theirs = nsight(TINY)
    assert tiny.rate_at("hbm") == pytest.approx(theirs["dram_per_s"], rel=0.07)
    assert max(theirs["sm_percent"], theirs["memory_percent"]) < 60  # Nsight's own rule says latency too


def test_gemm_work_is_the_matrix_product_it_computed(h100):
    """2 launches of an 8192^3 bf16 GEMM: 2 * 2 * 8192^3 FLOP, plus the 320x128 tiles' padding (8320/8192)."""
    gemm = kernel(h100.roofline, GEMM)
    assert gemm.calls == 2 and gemm.main_precision == "matrix_bf16"
    assert dict(gemm.work)["matrix_bf16"] == pytest.approx(2 * 2 * 8192 ** 3 * 8320 / 8192, rel=0.001)
    assert gemm.intensity_hbm == pytest.approx(808.8, rel=0.01)


def test_measured_peaks_are_the_dense_tensor_rate_with_the_datasheet_beside():
    tables = NcuCsvReader().read_file(H100 / "roofline_ncu_metrics.csv")
    summary = build(tables, SourceInfo(kind="ncu-csv", path="x"), countersets.load("roofline", "nvidia", "sm_90").derived)
    times = {k.name: (k.calls, k.total_ns) for k in summary.kernels}
    result = roofline.analyse_rows(summary.counters_by_kernel, times, vendor="nvidia", arch="sm_90",
                                   gpu_name="NVIDIA H100 80GB HBM3 (sm_90)")
    bf16, hbm = result.roof("matrix_bf16"), result.roof("hbm")
    assert bf16.source.startswith("measured") and bf16.datasheet == 989.4e12
    assert bf16.value == pytest.approx(540_672 * 1.59e9, rel=0.02)  # dense hgmma per cycle x base clock
    assert hbm.value == pytest.approx(3.35e12, rel=0.01) and hbm.datasheet == 3.35e12
    assert result.gpu == "H100 SXM"


def test_a_precision_without_a_peak_is_unknown_not_latency_bound():
    """The first H100 capture asked for the sparse tensor peak only: the GEMM's dense roof is not
    known there, and saying "latency-bound" would be wrong."""
    rows = [{"kernel": "gemm", "flop_matrix_bf16": 2e12, "bytes_hbm": 2.5e9, "peak_bytes_per_s_hbm": 3.35e12}]
    result = roofline.analyse_rows(rows, {"gemm": (2, 3e6)})
    only = result.kernels[0]
    assert only.verdict == "unknown" and "no BF16 matrix peak" in only.carrying


def test_summary_with_a_roofline_round_trips_through_summary_json(h100, tmp_path):
    path = tmp_path / "summary.json"
    h100.write(path)
    assert Summary.read(path).roofline == h100.roofline


# ------------------------------------------------------------------ compare
def test_compare_says_how_each_kernel_moved():
    """The whole run against the bounded run (one GEMM launch): the GEMM is in both, the rest only in A."""
    derived = countersets.load("roofline", "nvidia", "sm_90").derived
    full = build(NcuCsvReader().read_file(H100 / "roofline_ncu_metrics.csv"), SourceInfo(kind="x", path="a"), derived)
    one = build(NcuCsvReader().read_file(H100 / "roofline_bounded_ncu_metrics.csv"), SourceInfo(kind="x", path="b"),
                derived)
    moves = roofline.compare(full.roofline, one.roofline)
    gemm = next(m for m in moves if GEMM in m.kernel)
    assert gemm.verdict_before == gemm.verdict_after == "compute-bound"
    assert gemm.roof_percent_after == pytest.approx(gemm.roof_percent_before, abs=3.0) and not gemm.moved
    add = next(m for m in moves if ADD in m.kernel)
    assert add.verdict_after is None and add.moved and add.sentence == "only in the first run"
    # a kernel whose verdict changes has moved
    slower = roofline.compare(full.roofline, full.roofline)
    assert not any(m.moved for m in slower)


def test_the_bounded_run_profiled_one_gemm_launch_only():
    tables = NcuCsvReader().read_file(H100 / "roofline_bounded_ncu_metrics.csv")
    assert {name: s.calls for name, s in tables.kernels.items()} == {
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT": 1}


# ------------------------------------------------------------------ AMD: formulas on real captures
def amd_rows(capture: Path, arch: str) -> tuple[list[dict], dict[str, tuple[int, float]]]:
    """rocprofiler-compute's pmc_perf.csv (one row per dispatch) -> the counters_by_kernel rows the
    roofline reads: counters summed per kernel, then the roofline set's derived formulas of `arch`."""
    derived = countersets.load("roofline", "amd", arch).derived
    sums: dict[str, dict[str, float]] = {}
    times: dict[str, tuple[int, float]] = {}
    with open(capture, newline="") as handle:
        for row in csv.DictReader(handle):
            name = row["Kernel_Name"]
            values = sums.setdefault(name, {})
            for column, text in row.items():
                if column.isupper() or column.endswith("_sum"):
                    values[column] = values.get(column, 0.0) + float(text or 0)
            calls, total = times.get(name, (0, 0.0))
            times[name] = (calls + 1, total + float(row["End_Timestamp"]) - float(row["Start_Timestamp"]))
    rows = []
    for name, values in sums.items():
        row: dict = {"kernel": name, **values}
        for metric, formula in derived.items():
            result = countersets.evaluate(formula, values)
            if result is not None:
                row[metric] = result
        rows.append(row)
    return rows, times


def test_mi300x_hbm_bytes_by_hand():
    """vecCopy of 2^20 doubles on an MI300X: first dispatch 128*65536 (bubble reads) + 64*(65786 -
    65536) + 64*131072 (64 B writes) = 16,793,216 bytes in 16,119 ns; three dispatches together."""
    rows, times = amd_rows(ROCPROF_COMPUTE / "mi300x_vecCopy_pmc_perf.csv", "gfx942")
    (row,) = rows
    reads = 128 * 3 * 65536 + 64 * ((65786 + 65778 + 65763) - 3 * 65536)
    writes = 64 * 3 * 131072
    assert row["bytes_hbm"] == reads + writes == 50_377_664
    assert row["bytes_l2"] == 64 * 3 * (65536 + 131072)  # rocprofiler-compute counts 64 B per request
    assert row["flop_vector_fp64"] == 0 and row["flop_matrix_bf16"] == 0
    result = roofline.analyse_rows(rows, times, vendor="amd", arch="gfx942", gpu_name="AMD Instinct MI300X (gfx942)")
    copy = result.kernels[0]
    ns = (716380685161855 - 716380685145736) + (716380685197573 - 716380685184013) + (716380685231332 - 716380685217852)
    assert copy.total_ns == ns == 43_159
    assert copy.rate_at("hbm") == pytest.approx(50_377_664 / 43_159e-9)  # 1.167 TB/s
    assert copy.percent_at("hbm") == pytest.approx(100 * 50_377_664 / 43_159e-9 / 5.3e12)  # 22 % of the datasheet
    assert copy.verdict == "latency-bound" and copy.flop == 0  # a 14 µs copy: far from both roofs
    assert result.roof("hbm").source == "datasheet: Instinct MI300X"


def test_mi200_hbm_bytes_by_hand_against_the_empirical_roof():
    """gfx90a spells HBM traffic TCC_EA_*: 64*131080 reads + 64*131072 writes = 16,777,728 bytes in
    20,160 ns = 832 GB/s, 59.9 % of the 1,388.76 GB/s rocprofiler-compute measured on that machine."""
    rows, times = amd_rows(ROCPROF_COMPUTE / "mi200_vecCopy_pmc_perf.csv", "gfx90a")
    assert rows[0]["bytes_hbm"] == 64 * 131080 + 64 * 131072 == 16_777_728
    empirical = roofline.read_empirical(ROCPROF_COMPUTE / "mi200_roofline.csv", device=0)
    assert empirical["hbm"] == pytest.approx(1388.7638e9) and empirical["matrix_bf16"] == pytest.approx(170438.3e9)
    result = roofline.analyse_rows(rows, times, vendor="amd", arch="gfx90a", gpu_name="AMD Instinct MI250X (gfx90a)",
                                   empirical=empirical)
    copy = result.kernels[0]
    assert copy.rate_at("hbm") == pytest.approx(16_777_728 / 20_160e-9)
    assert copy.percent_at("hbm") == pytest.approx(59.93, abs=0.01)
    assert result.roof("hbm").source.startswith("empirical") and result.roof("hbm").datasheet == 1.6384e12
    assert copy.verdict == "latency-bound"  # just under Nsight Compute's 60 % line


def test_a_machines_cached_empirical_peaks_replace_the_datasheet(tmp_path, monkeypatch):
    import dataclasses
    import shutil
    from profilectl.read.summary import KernelRow, RunMetadata
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rows, times = amd_rows(ROCPROF_COMPUTE / "mi200_vecCopy_pmc_perf.csv", "gfx90a")
    summary = Summary(source=SourceInfo(kind="x", path="x"), counters_by_kernel=tuple(rows),
                      kernels=tuple(KernelRow(name=k, calls=c, total_ns=t, mean_ns=t / c, percent=100.0)
                                    for k, (c, t) in times.items()),
                      metadata=RunMetadata(host="mi200-node", gpu="AMD Instinct MI250X (gfx90a)"))
    assert roofline.analyse(summary).roof("hbm").source.startswith("datasheet")
    cache = roofline.empirical_cache("mi200-node", "gfx90a")
    cache.parent.mkdir(parents=True)
    shutil.copy(ROCPROF_COMPUTE / "mi200_roofline.csv", cache)
    measured = roofline.analyse(summary)
    assert measured.roof("hbm").source.startswith("empirical") and measured.roof("hbm").value == 1388.7638e9
    other = dataclasses.replace(summary, metadata=RunMetadata(host="elsewhere", gpu="AMD Instinct MI250X (gfx90a)"))
    assert roofline.analyse(other).roof("hbm").source.startswith("datasheet")


def test_amd_formulas_are_rocprofiler_computes():
    """The VALU/MFMA FLOP and L2/LDS byte formulas of rocprofiler-compute's 0400_roofline.yaml, on
    counts where the answer is plain arithmetic."""
    derived = countersets.load("roofline", "amd", "gfx942").derived
    counts = {c: 0.0 for c in countersets.load("roofline", "amd", "gfx942").counters}
    counts.update(SQ_INSTS_VALU_FMA_F32=10, SQ_INSTS_VALU_ADD_F32=1, SQ_INSTS_VALU_MFMA_MOPS_BF16=3,
                  SQ_LDS_IDX_ACTIVE=7, SQ_LDS_BANK_CONFLICT=2)
    assert countersets.evaluate(derived["flop_vector_fp32"], counts) == 64 * (1 + 2 * 10)
    assert countersets.evaluate(derived["flop_matrix_bf16"], counts) == 512 * 3
    assert countersets.evaluate(derived["bytes_lds"], counts) == (7 - 2) * 4 * 32


# ------------------------------------------------------------------ counter names and passes
@pytest.mark.parametrize("vendor,arch", [("amd", "gfx90a"), ("amd", "gfx942"), ("amd", "gfx950"), ("amd", "gfx1100"),
                                         ("amd", "gfx1151"), ("amd", "gfx1201"), ("nvidia", "sm_80"),
                                         ("nvidia", "sm_89"), ("nvidia", "sm_90"), ("nvidia", "sm_100"),
                                         ("nvidia", "sm_120")])
def test_every_formula_uses_only_counters_the_set_collects(vendor, arch):
    import re
    counter_set = countersets.load("roofline", vendor, arch)
    assert "bytes_hbm" in counter_set.derived
    for metric, formula in counter_set.derived.items():
        for name in re.findall(r"[A-Za-z_][\w.]*", formula):
            assert name in counter_set.counters, f"{arch}: {metric} needs {name}"


def test_hopper_metrics_exist_on_an_h200_and_an_h100():
    listing = {line.split()[0] for line in (FIXTURES / "nvidia-h200-device/ncu-query-metrics.names.txt").read_text()
               .splitlines() if line.strip() and "__" in line.split()[0]}
    from profilectl.formats.ncu import LAUNCH_METRICS, metric_base
    metrics = countersets.load("roofline", "nvidia", "sm_90").counters
    assert [m for m in metrics if metric_base(m) not in listing | LAUNCH_METRICS] == []
    # and ncu on the H100 collected every one of them (no metric failed)
    collected = {row["Metric Name"] for row in csv.DictReader(
        line for line in (H100 / "roofline_ncu_metrics.csv").read_text().splitlines() if not line.startswith("=="))}
    assert set(metrics) <= collected


def defined_counters(generation: str) -> dict[str, set[str]]:
    """Counter names rocprofiler-sdk defines per architecture (its counter_defs.yaml, names only;
    tests/fixtures/rocprofiler-sdk-counters/README.md)."""
    text = (FIXTURES / "rocprofiler-sdk-counters" / f"{generation}.txt").read_text()
    return {arch: set(names.split()) for arch, names in (line.split(":", 1) for line in text.splitlines())}


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"])
def test_amd_counter_names_are_defined_by_rocprofiler_sdk(arch):
    defined = defined_counters("2025-08")[arch]
    assert [c for c in countersets.load("roofline", "amd", arch).counters if c not in defined] == []


def test_gfx942s_bubble_and_fp8_counters_are_newer_than_the_2024_definitions():
    """What an older ROCm would refuse (profilectl validates names against the GPU's own list first)."""
    older = defined_counters("2024-10")
    missing = [c for c in countersets.load("roofline", "amd", "gfx942").counters if c not in older["gfx942"]]
    assert missing == ["SQ_INSTS_VALU_MFMA_MOPS_F8", "TCC_BUBBLE_sum"]
    assert [c for c in countersets.load("roofline", "amd", "gfx90a").counters if c not in older["gfx90a"]] == []


def test_amd_roofline_set_is_split_into_passes_within_the_block_limits():
    for arch in ("gfx90a", "gfx942", "gfx950"):
        passes = countersets.split_passes(countersets.load("roofline", "amd", arch).counters)
        assert len(passes) == 3
        assert all(sum(1 for c in p if c.startswith("TCC_")) <= 4 for p in passes)


# ------------------------------------------------------------------ bounded: --dry-run argv
def test_bounded_roofline_becomes_rocprofv3_flags_and_three_passes(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2", sets=("roofline",))
    done = cli(machine, "counters", "--dry-run", "--json", "--set", "roofline", "--kernel", "gemm",
               "--launch-count", "1", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    argv = plan["phases"][0]["steps"][0]["argv"]
    assert argv[argv.index("--kernel-include-regex") + 1] == "gemm"
    assert argv[argv.index("--kernel-iteration-range") + 1] == "[1-1]"
    passes = [job["pmc"] for job in json.loads(plan["phases"][0]["input_files"]["raw/input.json"])["jobs"]]
    assert len(passes) == 3  # ROCm 7.0 reads a JSON `jobs:` input, one job per pass
    assert "TCC_BUBBLE_sum" in passes[0] and "SQ_INSTS_VALU_MFMA_MOPS_BF16" in passes[1]
    steps = cli(machine, "counters", "--dry-run", "--json", "--set", "roofline", "--steps", "3:4", "--", *WORKLOAD)
    assert steps.returncode == 0, steps.stderr


def test_bounded_roofline_becomes_ncu_flags(machine):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0")
    machine.tool("ncu", "Version 2025.3.1.0\n")
    done = cli(machine, "counters", "--dry-run", "--json", "--set", "roofline", "--kernel", "gemm",
               "--launch-count", "1", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["phases"][0]["steps"][0]["argv"]
    assert argv[argv.index("--kernel-name") + 1] == "regex:^(?!.*(?:nccl)).*(?:gemm)"
    assert argv[argv.index("--launch-count") + 1] == "1"
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained" in metrics
    assert "dram__bytes.sum" in metrics and "launch__waves_per_multiprocessor" in metrics
    done = cli(machine, "counters", "--dry-run", "--json", "--set", "roofline", "--steps", "10:11", "--", *WORKLOAD)
    plan = json.loads(done.stdout)
    argv = plan["phases"][0]["steps"][0]["argv"]
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert plan["phases"][0]["environment"]["PROFILECTL_STEPS"] == "10:11"
