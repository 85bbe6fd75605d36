#!/usr/bin/env python3
"""profilectl's roofline numbers beside Nsight Compute's own, for the same launches of
bench/workloads/roofline_kernels.py (bench/nvidia_roofline.sh wrote both files; docs/validation.md).

  python3 bench/roofline_vs_ncu.py tests/fixtures/nvidia-h100-roofline

Nsight Compute's values come from its sections' metrics, the way its charts compute them: DRAM
bandwidth dram__bytes.sum.per_second; FP32 work (FADD + FMUL + 2 FFMA per cycle) x SM clock; tensor
work sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second; percent of peak: the sections'
pct_of_peak_sustained_elapsed of the DRAM and the dense bf16 warpgroup-MMA path; its verdict: the
SpeedOfLight rule (compute and memory throughput both under 60 % = latency)."""

import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from profilectl import countersets  # noqa: E402
from profilectl.formats.ncu import NcuCsvReader  # noqa: E402
from profilectl.read.summary import SourceInfo, build  # noqa: E402

KERNELS = {"add (memory-bound)": "CUDAFunctor_add", "bf16 GEMM (compute-bound)": "nvjet",
           "tiny mul (latency-bound)": "MulFunctor"}


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def ncu_values(path: Path) -> dict[str, dict[str, float]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("==")]
    rows = list(csv.reader(lines))
    header, data = rows[0], rows[2:]
    out = {}
    for label, needle in KERNELS.items():
        launches = [dict(zip(header, r)) for r in data if needle in r[header.index("Kernel Name")]]
        def mean(metric: str) -> float:
            return statistics.fmean(number(r[metric]) for r in launches)
        fp32 = statistics.fmean((number(r["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"])
                                 + number(r["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"])
                                 + 2 * number(r["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"]))
                                * number(r["smsp__cycles_elapsed.avg.per_second"]) for r in launches)
        tensor = mean("sm__ops_path_tensor_src_bf16_dst_fp32.sum.per_second")
        sm, memory = mean("sm__throughput.avg.pct_of_peak_sustained_elapsed"), \
            mean("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
        # Nsight Compute's roofline chart: the point (intensity, work) against its roofs
        clock = mean("sm__cycles_elapsed.avg.per_second")
        dram_peak = mean("dram__bytes.sum.peak_sustained") * mean("dram__cycles_elapsed.avg.per_second")
        tensor_peak = mean("sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained") * clock
        fp32_peak = 2 * mean("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained") * clock
        work, peak = (tensor, tensor_peak) if tensor > fp32 else (fp32, fp32_peak)
        bandwidth = mean("dram__bytes.sum.per_second")
        intensity = work / bandwidth if bandwidth else 0.0
        roof_percent = 100 * work / min(peak, intensity * dram_peak) if work and intensity else 0.0
        best = max(sm, memory, roof_percent)
        out[label] = {"launches": len(launches), "hbm_bytes_per_s": mean("dram__bytes.sum.per_second"),
                      "hbm_percent": mean("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
                      "fp32_flop_per_s": fp32, "tensor_flop_per_s": tensor, "intensity": intensity,
                      "roof_percent": max(roof_percent, 100 * bandwidth / dram_peak),
                      "tensor_percent": mean("sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum."
                                             "pct_of_peak_sustained_elapsed"),
                      "sol_sm": sm, "sol_memory": memory,
                      "verdict": "latency-bound" if best < 60 else
                      "compute-bound" if intensity * dram_peak > peak else "memory-bound"}
    return out


def profilectl_values(path: Path) -> dict[str, dict[str, float | str | None]]:
    tables = NcuCsvReader().read_file(path)
    summary = build(tables, SourceInfo(kind="ncu-csv", path=str(path)), countersets.load("roofline", "nvidia", "sm_90").derived)
    assert summary.roofline is not None
    out: dict[str, dict[str, float | str | None]] = {}
    for label, needle in KERNELS.items():
        kernel = next(k for k in summary.roofline.kernels if needle in k.kernel)
        seconds = kernel.total_ns / 1e9
        work = dict(kernel.work)
        out[label] = {"launches": kernel.calls, "hbm_bytes_per_s": kernel.rate_at("hbm"),
                      "hbm_percent": kernel.percent_at("hbm"),
                      "fp32_flop_per_s": work.get("vector_fp32", 0.0) / seconds,
                      "tensor_flop_per_s": work.get("matrix_bf16", 0.0) / seconds,
                      "intensity": kernel.intensity_hbm,
                      "tensor_percent": kernel.compute_percent if kernel.main_precision == "matrix_bf16" else None,
                      "roof_percent": kernel.roof_percent, "verdict": kernel.verdict, "carrying": kernel.carrying}
    return out


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/nvidia-h100-roofline")
    theirs = ncu_values(folder / "ncu_sections_raw.csv")
    ours = profilectl_values(folder / "roofline_ncu_metrics.csv")
    print("| kernel | quantity | profilectl | Nsight Compute | difference |\n| --- | --- | --- | --- | --- |")
    for label in KERNELS:
        a, b = ours[label], theirs[label]
        for key, words, scale, unit in (("hbm_bytes_per_s", "HBM bandwidth", 1e12, "TB/s"),
                                        ("hbm_percent", "HBM % of peak", 1, "%"),
                                        ("fp32_flop_per_s", "FP32 FLOP/s", 1e9, "GFLOP/s"),
                                        ("tensor_flop_per_s", "BF16 tensor FLOP/s", 1e12, "TFLOP/s"),
                                        ("tensor_percent", "BF16 tensor % of peak", 1, "%"),
                                        ("intensity", "FLOP per HBM byte", 1, ""),
                                        ("roof_percent", "% of roof at that intensity", 1, "%")):
            x, y = a.get(key), b.get(key)
            if x is None or not y:
                continue
            diff = f"{100 * (float(x) - y) / y:+.1f} %" if y else "-"
            print(f"| {label} | {words} | {float(x) / scale:.4g} {unit} | {y / scale:.4g} {unit} | {diff} |")
        print(f"| {label} | verdict | {a['verdict']} ({a['carrying']}) | {b['verdict']} (roofline chart; SOL SM {b['sol_sm']:.1f} %, "
              f"memory {b['sol_memory']:.1f} %) | |")


if __name__ == "__main__":
    main()
