"""Real torch.profiler (Kineto) traces of several torch generations, read into the same tables.

Categories changed over the releases (pytorch/kineto libkineto/src/output_json.cpp history):
torch 1.8/1.9 write `Kernel`, `Operator`, `Runtime`, `Memcpy`, `Memset`; later releases `kernel`,
`cpu_op`, `cuda_runtime`, `gpu_memcpy`, `gpu_memset`. Every expected number here is computed from the
raw events with json and sum, independently of the reader."""

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from profilectl.formats import torch_trace
from profilectl.formats.reader import read_path
from profilectl.backends import READERS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GENERATIONS = {
    # file: (kernel category, copy categories, runtime category) as that release wrote them
    "kineto/torch1.8_resnet50_worker0.pt.trace.json.gz": ("Kernel", ("Memcpy", "Memset"), "Runtime"),
    "kineto/torch1.9_resnet50_worker0.pt.trace.json.gz": ("Kernel", ("Memcpy", "Memset"), "Runtime"),
    "kineto/inference_rank_1.json.gz": ("Kernel", ("Memcpy", "Memset"), "Runtime"),
    "hta/trace_filter_sampled_rank-0.json.gz": ("kernel", ("gpu_memcpy", "gpu_memset"), "cuda_runtime"),
    # Kineto on ROCm 6.2 (roctracer): HIP calls filed as cuda_runtime
    "hta/amd_mi250_minitoy_train_ROCm6_2_kineto.json.gz": ("kernel", ("gpu_memcpy", "gpu_memset"), "cuda_runtime"),
    "hta/ns_resolution_rank-0.pt.trace.json.gz": ("kernel", ("gpu_memcpy", "gpu_memset"), "cuda_runtime"),
    "nvidia-h200/torch_profiler_trace.json": ("kernel", ("gpu_memcpy", "gpu_memset"), "cuda_runtime"),
}


def raw_events(path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def hand_sums(events, categories):
    """Per name: [calls, total ns] of the complete events of these categories; µs to ns by hand."""
    sums = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in categories and "dur" in e:
            sums[e["name"]][0] += 1
            sums[e["name"]][1] += round(e["dur"] * 1000)
    return dict(sums)


def table(stats):
    return {name: [s.calls, int(s.total)] for name, s in stats.items()}


@pytest.mark.parametrize("name", GENERATIONS)
def test_every_kernel_copy_and_runtime_call_equals_the_hand_computation(name):
    path = FIXTURES / name
    kernel, copies, runtime = GENERATIONS[name]
    events = raw_events(path)
    tables = torch_trace.read(path)
    assert tables.kernels and table(tables.kernels) == hand_sums(events, {kernel})
    assert table(tables.memory_copies) == hand_sums(events, set(copies))
    assert table(tables.api) == hand_sums(events, {runtime, "cuda_driver"})


@pytest.mark.parametrize("name", [n for n in GENERATIONS if "torch1." in n])
def test_torch_1_8_and_1_9_operators_steps_and_launch_links(name):
    path = FIXTURES / name
    events = raw_events(path)
    tables = read_path(path, READERS)  # what `profilectl report` does with the file
    operator_names = {e["name"] for e in events if e.get("cat") == "Operator"}
    assert set(tables.operators) <= operator_names and "aten::conv2d" in tables.operators
    calls = sum(1 for e in events if e.get("cat") == "Operator" and e["name"] == "aten::conv2d")
    assert tables.operators["aten::conv2d"].calls == calls
    # the ProfilerStep#N range (written as an "Operator" then) is a step mark on the timeline
    steps = [(e["name"], e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in events
             if e.get("name", "").startswith("ProfilerStep#")]
    timeline, = tables.timelines
    assert [(m.name, m.start, m.end) for m in timeline.markers] == steps
    # kernels link to their launches through args.correlation, as in later releases
    launched = {e["args"]["correlation"] for e in events if e.get("cat") == "Runtime"}
    kernels = [e for e in events if e.get("cat") == "Kernel"]
    linked = sum(1 for e in kernels if e["args"]["correlation"] in launched)
    assert linked > 0
    assert sum(1 for c in timeline.correlation if c in launched) == linked + sum(
        1 for e in events if e.get("cat") in ("Memcpy", "Memset") and e["args"]["correlation"] in launched)


def test_gpu_ranges_of_kineto_2021_to_2022_and_user_ranges_of_torch_1_8(tmp_path):
    """Kineto wrote GPU-side ranges as "gpu_user_Annotation" from June 2021 to May 2022 (ActivityType
    names, pytorch/kineto history) and torch 1.8 CPU-side ranges as "User": both are read like
    today's gpu_user_annotation and user_annotation (a small trace in that layout, numbers by hand)."""
    events = [
        {"ph": "X", "cat": "User", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110, "dur": 20},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 115, "dur": 5,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 121, "dur": 9,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "gpu_user_Annotation", "name": "ProfilerStep#3", "pid": 0, "tid": "stream 7",
         "ts": 121, "dur": 9},
    ]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    tables = torch_trace.read(path)
    row, = tables.annotations
    assert (row.name, row.calls, row.total_ns, row.self_ns, row.gpu_ns) == ("ProfilerStep#3", 1, 50_000, 30_000, 9_000)
    assert tables.operators["aten::mm"].self_total == 15_000
    timeline, = tables.timelines
    assert sorted((m.start, m.end, m.on_gpu) for m in timeline.markers) == [
        (100_000, 150_000, False), (121_000, 130_000, True)]


# ---------------------------------------------------------------- steps and annotations of torch 1.8/1.9
TORCH_RANGES = ("ProfilerStep#", "enumerate(DataLoader)#", "Optimizer.step#", "Optimizer.zero_grad#")


@pytest.mark.parametrize("name", [n for n in GENERATIONS if "torch1." in n])
def test_torch_1_8_and_1_9_ranges_are_annotations_not_operators(name):
    """torch 1.8/1.9 wrote record_function ranges as "Operator" events: the ranges torch opens itself
    (profiler.step, the DataLoader's iterator, the optimizer) go to the annotations table, with
    calls and totals as in the file, and stay out of the operators table."""
    path = FIXTURES / name
    events = raw_events(path)
    ranges = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "Operator" and e["name"].startswith(TORCH_RANGES):
            ranges[e["name"]][0] += 1
            ranges[e["name"]][1] += e["dur"] * 1000  # whole µs in these releases
    assert any(n.startswith("ProfilerStep#") for n in ranges) and len(ranges) == 4
    tables = read_path(path, READERS)
    assert {a.name: [a.calls, a.total_ns] for a in tables.annotations} == dict(ranges)
    assert not set(ranges) & set(tables.operators)
    assert "aten::conv2d" in tables.operators  # operators stay operators
    step = next(a for a in tables.annotations if a.name.startswith("ProfilerStep#"))
    assert step.gpu_ns and step.gpu_ns > 0  # the kernels launched inside the step, linked by correlation


# ---------------------------------------------------------------- newer fields: collectives, the trace's clock
NCCL = "hta/nccl_parser_config_nccl_data.trimmed.json.gz"


def exact_ns(us):
    from decimal import Decimal
    return int(Decimal(str(us)) * 1000)


def test_collectives_keep_process_group_and_sizes_call_by_call():
    """HTA's 2-rank NCCL trace (torch 2.3 era): every record_param_comms range and every NCCL kernel
    carrying Kineto's copy of its args, in file order, with the process group and sizes as written."""
    path = FIXTURES / NCCL
    events = [e for e in raw_events(path) if e.get("ph") == "X" and "Collective name" in (e.get("args") or {})]
    tables = torch_trace.read(path)
    rows = tables.collectives
    assert len(rows) == len(events) and {r.side for r in rows} == {"host", "gpu"}
    for row, e in zip(rows, events):
        args = e["args"]
        assert (row.side, row.event, row.name) == ("gpu" if e["cat"] == "kernel" else "host", e["name"],
                                                   args["Collective name"])
        assert (row.process_group, row.process_group_desc, row.group_ranks) == (
            args.get("Process Group Name"), args.get("Process Group Description"), args.get("Process Group Ranks"))
        assert (row.in_elements, row.out_elements, row.group_size, row.dtype) == (
            args["In msg nelems"], args["Out msg nelems"], args["Group size"], args["dtype"])
        assert row.sequence is None  # this torch wrote no "Seq"
        assert (row.start_ns, row.end_ns) == (exact_ns(e["ts"]), exact_ns(e["ts"]) + exact_ns(e["dur"]))
    assert sum(1 for r in rows if r.process_group == "0") > len(rows) // 2
    assert torch_trace.read(path, fast=False).collectives == rows  # the stdlib's decoding: the same rows
    # the trace's own clock: its timestamps count from baseTimeNanoseconds
    with gzip.open(path, "rt") as fh:
        base = json.load(fh)["baseTimeNanoseconds"]
    clock, = tables.clocks
    assert (clock.base_ns, clock.source) == (base, "baseTimeNanoseconds")


def test_collectives_of_torch_2_1_name_the_group_by_its_id_and_seq_is_read(tmp_path):
    path = FIXTURES / "hta/ns_resolution_rank-0.pt.trace.json.gz"
    expected = [e["args"]["Process Group ID"] for e in raw_events(path)
                if e.get("ph") == "X" and "Collective name" in (e.get("args") or {})]
    tables = torch_trace.read(path)
    assert [r.process_group for r in tables.collectives] == [str(v) for v in expected] and expected
    assert tables.clocks == ()  # that Kineto wrote no baseTimeNanoseconds
    # torch's "Seq" (pytorch/pytorch#177148, 2026) on both sides: no public trace holds it yet
    args = {"Collective name": "allreduce", "Process Group Name": "0", "Seq": 41, "In msg nelems": 8,
            "Out msg nelems": 8, "Group size": 2, "dtype": "Float"}
    trace = tmp_path / "seq.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10, "dur": 2,
         "args": args},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 7,
         "ts": 13, "dur": 5, "args": {**args, "correlation": 3, "seq": 41}}], "baseTimeNanoseconds": 1000}))
    rows = torch_trace.read(trace).collectives
    assert [(r.side, r.sequence, r.process_group) for r in rows] == [("host", 41, "0"), ("gpu", 41, "0")]


def test_collectives_and_the_clock_survive_a_jobs_partial(tmp_path):
    """A job merges its ranks' partials, not their files: the collectives and the clock go with them."""
    import shutil
    from profilectl.read import partials
    folder = tmp_path / "raw"
    folder.mkdir()
    shutil.copyfile(FIXTURES / NCCL, folder / "rank0.pt.trace.json.gz")
    read = torch_trace.read(folder / "rank0.pt.trace.json.gz")
    back = partials.decode(partials.encode(partials.make(folder))).tables()
    assert back.collectives == read.collectives and len(back.collectives) == 16  # 9 ranges, 7 kernels
    assert back.clocks == read.clocks and back.clocks
