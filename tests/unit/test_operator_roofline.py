"""Operators on the roofline from a trace's shapes: every formula of profiling/operator_flops.yaml
against a hand computation, the reader's calls and GPU time against the raw events of real H100 and
MI300X traces, the placement by the roofline's own rule, the section and its chart."""

import gzip
import json
import math
import subprocess
from bisect import bisect_left
from pathlib import Path

import pytest
from test_launchers import SYSTEM_PYTHON, needs_torch  # the one check for Debian's torch at /usr/bin/python3

from profilectl.analysis import operator_roofline, roofline
from profilectl.analysis.formulas import FormulaError, evaluate
from profilectl.analysis.operator_roofline import formulas, work_of
from profilectl.formats import torch_trace
from profilectl.model.operators import OperatorShape

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H100_QWEN = FIXTURES / "real/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300_QWEN = FIXTURES / "real/tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100 = "NVIDIA H100 80GB HBM3 (sm_90)"
BF, F32 = "c10::BFloat16", "float"


def shaped(name, dims, types, concrete=(), calls=1, gpu_ns=0, kernels=()):
    return OperatorShape(rank="0", name=name, input_dims=tuple(tuple(d) for d in dims), input_types=tuple(types),
                         concrete=tuple(concrete), calls=calls, cpu_ns=1000, gpu_ns=gpu_ns, launches=len(kernels),
                         kernels=tuple(kernels))


# (operator, dims, types, concrete, FLOP by hand, bytes by hand): one case per operator of the data
M, K, N = 8944, 1024, 1024
CASES = [
    ("aten::mm", [[M, K], [K, N]], [BF, BF], ["", ""], 2 * M * K * N, (M * K + K * N + M * N) * 2),
    ("aten::addmm", [[N], [M, K], [K, N], [], []], [BF, BF, BF, "Scalar", "Scalar"], ["", "", "", "1", "1"],
     2 * M * K * N, (N + M * K + K * N + M * N) * 2),
    ("aten::bmm", [[8, 128, 64], [8, 64, 256]], [F32, F32], [], 2 * 8 * 128 * 64 * 256,
     (8 * 128 * 64 + 8 * 64 * 256 + 8 * 128 * 256) * 4),
    ("aten::baddbmm", [[8, 128, 256], [8, 128, 64], [8, 64, 256], [], []], [F32, F32, F32, "Scalar", "Scalar"], [],
     2 * 8 * 128 * 64 * 256, (8 * 128 * 256 + 8 * 128 * 64 + 8 * 64 * 256 + 8 * 128 * 256) * 4),
    # a 3-D input: the rows are 16 x 559
    ("aten::linear", [[16, 559, 1024], [2816, 1024], []], [BF, BF, ""], ["", "", ""],
     2 * 16 * 559 * 1024 * 2816, (16 * 559 * 1024 + 2816 * 1024 + 16 * 559 * 2816) * 2),
    ("aten::_scaled_mm", [[128, 256], [256, 512], [], [], [], [], [], []],
     ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, "", "", "Scalar", "Scalar"], [],
     2 * 128 * 256 * 512, 128 * 256 + 256 * 512 + 128 * 512 * 2),
    # ResNet's stem: 224 -> 112 with stride 2, padding 3
    ("aten::convolution", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
     [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
     ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"],
     2 * 32 * 64 * 3 * 7 * 7 * 112 * 112, (32 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 32 * 64 * 112 * 112) * 4),
    # a real backward of resnet_act_checkpoint (MI300X): grad input and grad weight, no bias
    ("aten::convolution_backward", [[10, 512, 7, 7], [10, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []],
     [BF, BF, BF, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar", "ScalarList"],
     ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"],
     2 * (2 * 10 * 512 * 512 * 9 * 49), 2 * (10 * 512 * 49 * 2 + 512 * 512 * 9) * 2),
    # the Qwen trace's causal attention: 16 x 16 heads x 559 x 64, halved for causality
    ("aten::scaled_dot_product_attention", [[16, 16, 559, 64]] * 3 + [[]] * 5, [BF] * 3 + ["", "Scalar", "Scalar",
                                                                                          "Scalar", "Scalar"],
     ["", "", "", "", "0.", "True", "0.125", "False"], 4 * 16 * 16 * 559 * 559 * 64 // 2, 4 * 16 * 16 * 559 * 64 * 2),
    ("aten::_scaled_dot_product_flash_attention", [[2, 8, 1024, 128]] * 3 + [[]] * 4, [BF] * 3 + ["Scalar"] * 4,
     ["", "", "", "0.", "False", "False", ""], 4 * 2 * 8 * 1024 * 1024 * 128, 4 * 2 * 8 * 1024 * 128 * 2),
    ("aten::_scaled_dot_product_efficient_attention", [[2, 8, 1024, 128]] * 3 + [[2, 8, 1024, 1024]] + [[]] * 4,
     [BF] * 4 + ["Scalar"] * 4, ["", "", "", "", "True", "0.", "True", ""], 4 * 2 * 8 * 1024 * 1024 * 128 // 2,
     (4 * 2 * 8 * 1024 * 128 + 2 * 8 * 1024 * 1024) * 2),
    ("aten::_scaled_dot_product_cudnn_attention", [[2, 8, 1024, 128]] * 3 + [[]] * 6, [BF] * 3 + [""] + ["Scalar"] * 5,
     ["", "", "", "", "True", "0.", "False", "False", ""], 4 * 2 * 8 * 1024 * 1024 * 128, 4 * 2 * 8 * 1024 * 128 * 2),
    # backward: 2.5 x the forward's FLOP (flash-attn); q, k, v, dO, O read, dQ, dK, dV written
    ("aten::_scaled_dot_product_flash_attention_backward", [[2, 8, 1024, 128]] * 5 + [[2, 8, 1024]] + [[]] * 6,
     [BF] * 5 + [F32] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar"], [""] * 10 + ["0.", "True"],
     2.5 * 4 * 2 * 8 * 1024 * 1024 * 128 / 2, 8 * 2 * 8 * 1024 * 128 * 2),
    ("aten::_scaled_dot_product_efficient_attention_backward", [[2, 8, 1024, 128]] * 4 + [[]] + [[2, 8, 1024, 128]]
     + [[2, 8, 1024]] + [[]] * 5, [BF] * 4 + [""] + [BF] + [F32] + ["", "", "Scalar", "ScalarList", "Scalar"],
     [""] * 9 + ["0.", "[True, True, True, False]", "False"], 2.5 * 4 * 2 * 8 * 1024 * 1024 * 128,
     8 * 2 * 8 * 1024 * 128 * 2),
    ("aten::_scaled_dot_product_cudnn_attention_backward", [[2, 8, 1024, 128]] * 5 + [[2, 8, 1024]] + [[]] * 9,
     [BF] * 5 + [F32] + [""] * 7 + ["Scalar", "Scalar"], [""] * 13 + ["0.", "False"],
     2.5 * 4 * 2 * 8 * 1024 * 1024 * 128, 8 * 2 * 8 * 1024 * 128 * 2),
    ("aten::softmax", [[64, 1000], [], []], [F32, "Scalar", ""], ["", "-1", ""], 3 * 64 * 1000, 2 * 64 * 1000 * 4),
    ("aten::_softmax", [[64, 1000], [], []], [BF, "Scalar", "Scalar"], ["", "-1", "False"], 3 * 64 * 1000,
     2 * 64 * 1000 * 2),
    ("aten::log_softmax", [[64, 1000], [], []], [F32, "Scalar", ""], ["", "1", ""], 3 * 64 * 1000, 2 * 64 * 1000 * 4),
    ("aten::_softmax_backward_data", [[64, 1000], [64, 1000], [], []], [F32, F32, "Scalar", "Scalar"], [],
     6 * 64 * 1000, 3 * 64 * 1000 * 4),
    # a real layer_norm of HTA's trace_diff_test: weight and bias given
    ("aten::layer_norm", [[1024, 512], [], [512], [512], [], []], [F32, "", F32, F32, "Scalar", "Scalar"], [],
     5 * 1024 * 512, (2 * 1024 * 512 + 2 * 512) * 4),
    ("aten::native_layer_norm", [[1024, 512], [], [], [], []], [F32, "", "", "", "Scalar"], [],
     4 * 1024 * 512, 2 * 1024 * 512 * 4),
    # a real rms_norm of TraceLens' normalisation test: normalised over [32, 32], so 8 * 16 rows
    ("aten::rms_norm", [[8, 16, 32, 32], [], [32, 32], []], [F32, "ScalarList", F32, ""], ["", "[32, 32]", "", ""],
     8 * 16 * (2 * 1024 + 2) + 2 * 8 * 16 * 1024, (2 * 8 * 16 * 1024 + 1024) * 4),
    ("aten::_fused_rms_norm", [[8, 16, 32, 32], [], [], []], [F32, "ScalarList", "", ""], ["", "[32, 32]", "", ""],
     8 * 16 * (2 * 1024 + 2) + 8 * 16 * 1024, 2 * 8 * 16 * 1024 * 4),
    # broadcast: [16, 16, 559, 64] x [1, 1, 559, 64] writes 16*16*559*64 elements
    ("aten::add", [[16, 16, 559, 64], [1, 1, 559, 64], []], [BF, BF, "Scalar"], ["", "", "1"],
     16 * 16 * 559 * 64, (16 * 16 * 559 * 64 * 2 + 559 * 64) * 2),
    ("aten::add_", [[4, 8], [8], []], [F32, F32, "Scalar"], ["", "", "1"], 32, (32 + 8 + 32) * 4),
    ("aten::sub", [[4, 8], [4, 8], []], [F32, F32, "Scalar"], [], 32, 96 * 4),
    ("aten::sub_", [[4, 8], [4, 8], []], [F32, F32, "Scalar"], [], 32, 96 * 4),
    # a Python number (a 0-dim double) times a tensor: 8 bytes read for it
    ("aten::mul", [[1, 559, 64], []], [F32, "double"], ["", ""], 559 * 64, 559 * 64 * 4 * 2 + 8),
    ("aten::mul_", [[4, 8], []], [F32, "Scalar"], ["", "0.5"], 32, 64 * 4),
    ("aten::div", [[4, 8], [4, 1]], [F32, F32], [], 32, (32 + 4 + 32) * 4),
    ("aten::div_", [[4, 8], [4, 8]], [F32, F32], [], 32, 96 * 4),
    ("aten::maximum", [[4, 8], [4, 8]], [BF, BF], [], 32, 96 * 2),
    ("aten::minimum", [[4, 8], [4, 8]], [BF, BF], [], 32, 96 * 2),
    ("aten::relu", [[32, 4096]], [BF], [], 32 * 4096, 2 * 32 * 4096 * 2),
    ("aten::relu_", [[32, 4096]], [BF], [], 32 * 4096, 2 * 32 * 4096 * 2),
    ("aten::silu", [[32, 4096]], [F32], [], 32 * 4096, 2 * 32 * 4096 * 4),
    ("aten::silu_", [[32, 4096]], [F32], [], 32 * 4096, 2 * 32 * 4096 * 4),
    ("aten::sigmoid", [[10]], [F32], [], 10, 80),
    ("aten::tanh", [[10]], [F32], [], 10, 80),
    ("aten::exp", [[10]], [F32], [], 10, 80),
    ("aten::neg", [[10]], [F32], [], 10, 80),
    ("aten::rsqrt", [[10]], [F32], [], 10, 80),
    ("aten::sqrt", [[10]], [F32], [], 10, 80),
    ("aten::reciprocal", [[10]], [F32], [], 10, 80),
    ("aten::gelu", [[1, 141, 2048], []], [BF, ""], ["", ""], 141 * 2048, 2 * 141 * 2048 * 2),
    ("aten::pow", [[16, 559, 1024], []], [F32, "Scalar"], ["", "2"], 16 * 559 * 1024, 2 * 16 * 559 * 1024 * 4),
    ("aten::copy_", [[32, 3, 224, 224], [32, 3, 224, 224], []], [BF, F32, "Scalar"], ["", "", "False"], 0,
     32 * 3 * 224 * 224 * (4 + 2)),
    ("aten::fill_", [[1000], []], [F32, "Scalar"], ["", "0"], 0, 4000),
]


@pytest.mark.parametrize("name,dims,types,concrete,flop,moved", CASES, ids=[c[0] for c in CASES])
def test_formula_against_hand_computation(name, dims, types, concrete, flop, moved):
    got_flop, got_bytes, error = work_of(shaped(name, dims, types, concrete))
    assert error is None
    assert got_flop == pytest.approx(flop, rel=1e-12)
    assert got_bytes == pytest.approx(moved, rel=1e-12)


def test_every_operator_of_the_data_has_a_hand_computed_case_and_a_source():
    operators = formulas()["operators"]
    assert set(operators) == {case[0] for case in CASES}
    assert all(spec.get("source") and spec.get("kind") and spec.get("pipe") in ("matrix", "vector")
               for spec in operators.values())


def test_transposed_convolution_uses_the_transposed_output_size():
    # ConvTranspose2d(16 -> 8, kernel 4, stride 2, padding 1): 32 x 32 -> 64 x 64; weight (C_in, C_out, k, k)
    row = shaped("aten::convolution", [[2, 16, 32, 32], [16, 8, 4, 4], [8], [], [], [], [], [], []],
                 [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                 ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[0, 0]", "1"])
    flop, moved, error = work_of(row)
    assert error is None
    assert flop == 2 * 2 * 16 * 8 * 4 * 4 * 32 * 32  # flop_counter: the input's spatial size when transposed
    assert moved == (2 * 16 * 32 * 32 + 16 * 8 * 16 + 8 + 2 * 8 * 64 * 64) * 4


def test_a_formula_needing_what_the_trace_lacks_says_why():
    # torch 1.9 recorded no Concrete Inputs: a convolution's stride is not known
    row = shaped("aten::convolution", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
                 [F32, F32, "", "GenericList", "GenericList", "GenericList", "Bool", "GenericList", "Int"])
    flop, _, error = work_of(row)
    assert math.isnan(flop) and "Concrete Inputs" in error


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "A.__class__", "open('/etc/passwd')",
                                        "[x for x in A]", "lambda: 1", "A if B else __import__('os')"])
def test_formulas_are_walked_never_evaluated(expression):
    with pytest.raises(FormulaError):
        evaluate(expression, {"A": (1, 2), "B": 0})


def test_tuple_arithmetic_broadcasts_numbers_and_pairs_elements():
    assert evaluate("(x[2:] + 2 * padding - 1) // stride + 1", {"x": (1, 2, 9, 7), "padding": (1, 0),
                                                                "stride": (2, 1)}) == (6, 7)
    assert evaluate("prod(broadcast(a, b))", {"a": (4, 1, 3), "b": (5, 1)}) == 60


# ------------------------------------------------------------------ the reader on real traces
def _events(path):
    with gzip.open(path) as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _by_hand(path, name, dims):
    """Calls of `name` with these input dims, not nested in another operator of the data, and the
    GPU ns of the kernels launched inside them (launch calls on the same thread, correlation ids)."""
    events = [e for e in _events(path) if e.get("ph") == "X"]
    known = formulas()["operators"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in known and "Input Dims" in (e.get("args") or {})]
    kernels = {}
    for e in events:
        if e.get("cat") == "kernel":
            kernels[e["args"]["correlation"]] = kernels.get(e["args"]["correlation"], 0) + round(e["dur"] * 1000)
    launches = sorted((round(e["ts"] * 1000), e["tid"], e["args"]["correlation"]) for e in events
                      if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {}))
    mine = [e for e in ops if e["name"] == name and e["args"]["Input Dims"] == dims]

    def inside(e, other):
        return other is not e and other["tid"] == e["tid"] and other["ts"] <= e["ts"] and \
            e["ts"] + e["dur"] <= other["ts"] + other["dur"] and (other["dur"], -other["ts"]) > (e["dur"], -e["ts"])
    outer = [e for e in mine if not any(inside(e, o) for o in ops)]
    gpu = 0
    for e in outer:
        start, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
        for ts, tid, corr in launches[bisect_left(launches, (start,)):bisect_left(launches, (end,))]:
            if tid == e["tid"]:
                gpu += kernels.get(corr, 0)
    return len(outer), gpu


@pytest.mark.parametrize("path", [H100_QWEN, MI300_QWEN], ids=["h100", "mi300x"])
def test_the_reader_keeps_each_outermost_call_and_the_kernels_it_launched(path):
    rows = torch_trace.read(path).operator_shapes
    linear = next(r for r in rows if r.name == "aten::linear" and r.input_dims[:2] == ((16, 559, 1024), (2816, 1024)))
    calls, gpu = _by_hand(path, "aten::linear", [[16, 559, 1024], [2816, 1024], []])
    assert (linear.calls, linear.gpu_ns) == (calls, gpu) and calls == 48 and gpu > 0
    assert linear.launches == 48 and linear.kernels[0][1] <= gpu
    assert linear.input_types == (BF, BF, "")
    # the addmm/mm calls inside aten::linear are the linear's, never counted again
    assert not any(r.name in ("aten::addmm", "aten::mm") and r.input_dims[1:2] == ((1024, 2816),) for r in rows)
    sdpa = next(r for r in rows if r.name == "aten::scaled_dot_product_attention")
    assert (sdpa.calls, sdpa.gpu_ns) == _by_hand(path, "aten::scaled_dot_product_attention",
                                                 [[16, 16, 559, 64]] * 3 + [[]] * 5)
    assert not any(r.name == "aten::_scaled_dot_product_flash_attention" for r in rows)
    assert sdpa.concrete[5] == "True"


def test_the_same_calls_with_and_without_the_columnar_decoder():
    fast = torch_trace.read(H100_QWEN).operator_shapes
    general = torch_trace.read(H100_QWEN, fast=False).operator_shapes
    assert fast and sorted(fast, key=repr) == sorted(general, key=repr)


def test_torch_1_9_shapes_without_concrete_inputs():
    path = FIXTURES / "real/kineto/torch1.9_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz"
    rows = torch_trace.read(path).operator_shapes  # torch 1.9: shapes, no Concrete Inputs
    conv = next(r for r in rows if r.name == "aten::convolution")
    assert math.isnan(work_of(conv)[0])
    linear = next(r for r in rows if r.name == "aten::linear")
    assert work_of(linear)[0] == 2 * 32 * 2048 * 1000


# ------------------------------------------------------------------ placement
def test_placement_is_the_roofline_rule_on_the_datasheet_roofs():
    rows = torch_trace.read(H100_QWEN).operator_shapes
    result = operator_roofline.analyse(rows, H100)
    assert result.gpu == "H100 SXM" and not result.unmodelled
    linear = next(op for op in result.operators if op.work.name == "aten::linear"
                  and op.work.signature.startswith("[16, 559, 1024] x [2816, 1024]"))
    flop = 2 * 16 * 559 * 1024 * 2816 * 48
    assert linear.work.flop == flop and linear.roof == "matrix_bf16"
    assert linear.flop_per_s == pytest.approx(flop / (linear.work.gpu_ns / 1e9))
    assert linear.compute_percent == pytest.approx(100 * linear.flop_per_s / 989.4e12)
    assert linear.hbm_percent == pytest.approx(100 * linear.bytes_per_s / 3.35e12)
    assert (linear.verdict, linear.bound_by) == roofline.verdict_of(
        {"matrix_bf16": linear.compute_percent, "hbm": linear.hbm_percent}, ("hbm",), 60.0)
    assert linear.verdict == "compute-bound"  # 617 TFLOP/s of 989 on this trace
    assert sum(op.share_percent for op in result.operators) == pytest.approx(100.0)


def test_mi300x_operators_are_held_to_its_roofs():
    result = operator_roofline.analyse(torch_trace.read(MI300_QWEN).operator_shapes, "AMD Instinct MI300X VF (gfx942)")
    assert result.gpu == "Instinct MI300X"
    linear = next(op for op in result.operators if op.work.name == "aten::linear")
    assert linear.roof == "matrix_bf16" and linear.compute_percent == pytest.approx(
        100 * linear.flop_per_s / 1307.4e12)


@pytest.mark.parametrize("dtype,kernel,roof", [(F32, "ampere_sgemm_128x64_tn", "vector_fp32"),
                                               (F32, "sm90_xmma_gemm_tf32f32_tf32f32_f32_tn_n", "matrix_tf32"),
                                               (BF, "sm90_xmma_gemm_bf16bf16", "matrix_bf16")])
def test_the_compute_roof_follows_the_dtype_and_a_tf32_kernel(dtype, kernel, roof):
    row = shaped("aten::mm", [[1024, 1024], [1024, 1024]], [dtype, dtype], calls=1, gpu_ns=100_000,
                 kernels=((kernel, 100_000),))
    assert operator_roofline.analyse([row], H100).operators[0].roof == roof


def test_counters_beside_shapes_where_the_counter_roofline_has_the_kernel():
    row = shaped("aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], calls=10, gpu_ns=2_000_000,
                 kernels=(("gemm_kernel", 2_000_000),))
    counters = roofline.analyse_rows([{"kernel": "gemm_kernel", "flop_matrix_bf16": 10 * 2 * 4096 ** 3,
                                       "bytes_hbm": 10 * 3 * 4096 * 4096 * 2}], {"gemm_kernel": (10, 2_000_000.0)},
                                     vendor="nvidia", arch="sm_90", gpu_name="H100")
    op = operator_roofline.analyse([row], H100, counters).operators[0]
    assert op.counter_kernel == "gemm_kernel" and op.counter_verdict == counters.kernels[0].verdict
    assert op.counter_flop_per_s == pytest.approx(op.flop_per_s)  # the same FLOP in the same time


# ------------------------------------------------------------------ the report
def test_the_section_table_findings_and_chart():
    import dataclasses

    from profilectl.report.renderers import html
    from profilectl.report.sections import build_document
    from profilectl.read.summary import RunMetadata, SourceInfo, build
    summary = build(torch_trace.read(H100_QWEN), SourceInfo(kind="chrome-trace", path=str(H100_QWEN)))
    summary = dataclasses.replace(summary, metadata=RunMetadata(gpu=H100))
    document = build_document(summary)
    section = next(s for s in document.sections if s.key == "operator_roofline")
    table = section.tables[0]
    index = {c.name: i for i, c in enumerate(table.columns)}
    first = table.rows[0]
    assert first[index["operator"]] == "aten::linear" and first[index["verdict"]] == "compute-bound"
    assert first[index["main_precision"]] == "BF16 matrix"
    assert section.findings[0].verdict == "compute-bound" and "% of peak" in section.findings[0].sentence
    page = html.render(document)
    chart = page[page.index("Operators on the roofline (FLOP/s"):]
    assert chart.count('class="kernel-point"') >= 10 and 'data-roof="matrix_bf16"' in chart


def test_operator_rows_survive_a_partial():
    from profilectl.read import partials
    tables = torch_trace.read(H100_QWEN)
    made = partials.of_tables(tables, H100_QWEN.parent, ())
    again = partials.decode(partials.encode(made))
    assert again.tables().operator_shapes == tables.operator_shapes


def test_gemm_flop_from_shapes_against_nsight_computes_count_of_the_same_gemm():
    """tests/fixtures/nvidia-h100-roofline: Nsight Compute's roofline counters on an H100 for
    bench/workloads/roofline_kernels.py's bf16 GEMM, C = A @ B with 8192^3 (torch.mm), 5 launches.
    The shapes' 2*M*N*K against the tensor pipe's counted operations: ncu counts the padded tiles of
    the 320x128 nvjet kernel (8192 rows in 26 tiles of 320: 8320 / 8192 = 1.0156), so the two agree
    to 1.6 %, well inside the issue's 10 %."""
    from profilectl.read.load import load
    counted = roofline.analyse(load(FIXTURES / "nvidia-h100-roofline"))
    gemm = next(k for k in counted.kernels if k.kernel.startswith("nvjet"))
    flop, _, error = work_of(shaped("aten::mm", [[8192, 8192], [8192, 8192]], [BF, BF]))
    assert error is None and flop == 2 * 8192 ** 3
    per_launch = gemm.flop / gemm.calls
    assert per_launch / flop == pytest.approx(8320 / 8192, rel=1e-3)
    assert abs(per_launch / flop - 1) < 0.10


CPU_PROFILE = r"""
import json, sys, torch
from torch.profiler import profile, ProfilerActivity
x, w, b = torch.randn(32, 64), torch.randn(128, 64), torch.randn(128)
q, k = torch.randn(4, 16, 8), torch.randn(4, 8, 16)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
    torch.nn.functional.linear(x, w, b)
    torch.mm(x, w.t())
    torch.bmm(q, k)
    torch.softmax(x, -1)
    torch.relu(x)
events = [{"ph": "X", "cat": "cpu_op", "name": e.name, "pid": 1, "tid": e.thread, "ts": e.time_range.start,
           "dur": e.time_range.elapsed_us(),
           "args": {"Input Dims": e.input_shapes, "Input type": ["float" if s else "" for s in e.input_shapes]}}
          for e in p.events()]
json.dump({"traceEvents": events}, open(sys.argv[1], "w"))
"""


@needs_torch
def test_a_real_cpu_profile_with_shapes(tmp_path):
    """Debian's torch 1.13 (no Kineto) records each operator's input shapes and its nesting
    (aten::linear calling aten::addmm calling aten::copy_); its own export drops them, so the
    script writes them in Kineto's layout, "Input type" from the float32 tensors it made (that
    profiler records no dtypes). Only the outermost operators of the data count; a CPU profile
    launches no kernel, so none is on the roofline."""
    trace = tmp_path / "cpu.pt.trace.json"
    subprocess.run([str(SYSTEM_PYTHON), "-c", CPU_PROFILE, str(trace)], check=True, timeout=120)
    rows = {r.name: r for r in torch_trace.read(trace).operator_shapes}
    assert set(rows) == {"aten::linear", "aten::mm", "aten::bmm", "aten::softmax", "aten::relu"}
    assert all(r.calls == 1 and r.gpu_ns == 0 for r in rows.values())
    assert rows["aten::linear"].input_dims == ((32, 64), (128, 64), (128,))
    assert work_of(rows["aten::linear"])[:2] == (2 * 32 * 64 * 128, (32 * 64 + 128 * 64 + 128 + 32 * 128) * 4)
    assert work_of(rows["aten::mm"])[0] == 2 * 32 * 64 * 128
    assert work_of(rows["aten::bmm"])[0] == 2 * 4 * 16 * 8 * 16
    assert work_of(rows["aten::softmax"])[0] == 3 * 32 * 64 and work_of(rows["aten::relu"])[0] == 32 * 64
    result = operator_roofline.analyse(tuple(rows.values()), None)
    assert not result.operators and result.no_gpu == 5


def test_a_tensorlists_shapes_read_back_from_json_stay_hashable():
    """A cached summary or a partial gives "Input Dims" back as JSON lists: a TensorList argument
    (aten::cat's) must still key the roofline's groups, as the reader's nested tuples do (a cache hit
    of such a trace used to end `report` in a TypeError)."""
    import msgspec

    from profilectl.files import load_typed
    from profilectl.model.operators import OperatorShape
    row = OperatorShape(rank="0", name="aten::cat", input_dims=(((8, 16), (8, 16)), ()), input_types=("TensorList", "Scalar"),
                        concrete=("", "0"), calls=1, cpu_ns=5, gpu_ns=3, launches=1)
    data = msgspec.json.encode(row)
    for back in (msgspec.json.decode(data, type=OperatorShape), load_typed(OperatorShape, json.loads(data), "x")):
        assert back == row and hash(back.input_dims) == hash(row.input_dims)
        assert operator_roofline.analyse([back], H100) is not None
