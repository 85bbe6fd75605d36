"""Timeline analysis on small traces with known answers, written in each tool's real layout (torch
Chrome trace, rocprofv3 CSV, rocprofv3 JSON, rocpd), and on the real H200 torch trace.

One scenario in every layout (µs; launches on the CPU, kernels on the GPU):
    gemm_a  stream A [0, 100]    launched [-10, -5]
    gemm_b  stream A [150, 250]  launched [140, 145]
    nccl    stream B [200, 400]  launched [145, 150]   (an all-reduce: communication)
    tiny    stream A [420, 422]  launched [405, 413]   (shorter than its launch call)
    steps:  ProfilerStep#5 over [-20, 260], ProfilerStep#6 over [260, 430] on the host (torch 2.x
            also writes GPU-side copies over [0, 250] and [250, 422]: the host side is the step)
Known answers: span 422, busy 352 (idle 70 in two gaps: 50 after gemm_a, 20 after nccl), 50 with
two activities at once, communication 200 of which 50 hidden under compute (25 %), one short kernel
(2 of 402 µs of kernel time), queue depth 492/432 on average (2 at most), launch delay (call end to
kernel start) (5 + 5 + 50 + 7) / 4 = 16.75 µs.
"""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl.analysis.timeline import analyse
from profilectl.formats.reader import read_path
from profilectl.backends import READERS
from rocpd_writer import SCHEMA_VERSIONS, RocpdWriter
from support import FIXTURES, REPO

US = 1000
BASE_US = 1_700_000_000_000  # a 13-digit microsecond clock, as torch writes it
KERNELS = [  # name, stream, start, end, correlation, launch start, launch end (µs from the base)
    ("gemm_a", "A", 0, 100, 1, -10, -5),
    ("gemm_b", "A", 150, 250, 2, 140, 145),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "B", 200, 400, 3, 145, 150),
    ("tiny", "A", 420, 422, 4, 405, 413),
]
GPU_STEPS = [("ProfilerStep#5", 0, 250), ("ProfilerStep#6", 250, 422)]
CPU_STEPS = [("ProfilerStep#5", -20, 260), ("ProfilerStep#6", 260, 430)]


def torch_trace(path: Path, shift_us: float = 0.0, gpu_steps: bool = True) -> Path:
    """kineto's layout: cat kernel with args.correlation, cuda_runtime launches, user_annotation and
    gpu_user_annotation ProfilerStep ranges."""
    events = []
    for name, stream, start, end, corr, l_start, l_end in KERNELS:
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7 if stream == "A" else 8,
                       "ts": BASE_US + shift_us + start, "dur": end - start,
                       "args": {"correlation": corr, "stream": 7 if stream == "A" else 8, "device": 0}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 42,
                       "ts": BASE_US + shift_us + l_start, "dur": l_end - l_start,
                       "args": {"correlation": corr, "cbid": 211}})
    for name, start, end in CPU_STEPS:
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 42, "tid": 42,
                       "ts": BASE_US + shift_us + start, "dur": end - start})
    if gpu_steps:
        for name, start, end in GPU_STEPS:
            events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7,
                           "ts": BASE_US + shift_us + start, "dur": end - start})
    events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 42, "tid": 42, "ts": BASE_US})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def rocprofv3_csv(folder: Path) -> Path:
    """rocprofv3's CSV layout (ROCm 6.4/7.x columns), timestamps in ns."""
    host = folder / "host-a"
    host.mkdir(parents=True)
    base = BASE_US * US
    with open(host / "1234_kernel_trace.csv", "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
                      "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp"])
        for i, (name, stream, start, end, corr, _, _) in enumerate(KERNELS):
            out.writerow(["KERNEL_DISPATCH", "Agent 4", 1 if stream == "A" else 2, 0, 1234, i + 1, i + 10, name,
                          corr, base + start * US, base + end * US])
    with open(host / "1234_hip_api_trace.csv", "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
                      "End_Timestamp"])
        for _, _, _, _, corr, l_start, l_end in KERNELS:
            out.writerow(["HIP_RUNTIME_API", "hipLaunchKernel", 1234, 1234, corr, base + l_start * US,
                          base + l_end * US])
    with open(host / "1234_marker_api_trace.csv", "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
                      "End_Timestamp"])
        for i, (name, start, end) in enumerate(CPU_STEPS):
            out.writerow(["MARKER_CORE_API", name, 1234, 1234, 100 + i, base + start * US, base + end * US])
        out.writerow(["MARKER_CORE_API", "before hipLaunchKernel", 1234, 1234, 200, base, base])  # an instant mark
    return folder


def rocprofv3_json(path: Path) -> Path:
    base = BASE_US * US
    dispatches = [{"correlation_id": {"internal": corr, "external": 0}, "start_timestamp": base + start * US,
                   "end_timestamp": base + end * US, "thread_id": 1,
                   "dispatch_info": {"agent_id": {"handle": 4}, "queue_id": {"handle": 1 if stream == "A" else 2},
                                     "kernel_id": i}}
                  for i, (_, stream, start, end, corr, _, _) in enumerate(KERNELS)]
    api = [{"kind": 1, "operation": 0, "correlation_id": {"internal": corr, "external": 0},
            "start_timestamp": base + l_start * US, "end_timestamp": base + l_end * US, "thread_id": 1}
           for _, _, _, _, corr, l_start, l_end in KERNELS]
    markers = [{"kind": 2, "operation": i, "correlation_id": {"internal": 100 + i, "external": 0},
                "start_timestamp": base + start * US, "end_timestamp": base + end * US, "thread_id": 1}
               for i, (_, start, end) in enumerate(CPU_STEPS)]
    tool = {"metadata": {"pid": 4242}, "kernel_symbols": [{"kernel_id": i, "formatted_kernel_name": k[0]}
                                                           for i, k in enumerate(KERNELS)],
            "strings": {"buffer_records": [{"kind": "NONE", "operations": []},
                                           {"kind": "HIP_RUNTIME_API", "operations": ["hipLaunchKernel"]},
                                           {"kind": "MARKER_CORE_API", "operations": [s[0] for s in CPU_STEPS]}]},
            "buffer_records": {"kernel_dispatch": dispatches, "hip_api": api, "marker_api": markers}}
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [tool]}))
    return path


def rocpd(path: Path, schema: str = "3.0.0") -> Path:
    """rocprofv3's rocpd database (tests/rocpd_writer.py: AMD's schema SQL, views over uuid tables,
    an event per row): each kernel linked to its hipLaunchKernel by the event's stack_id, every
    external correlation id 0 as rocprofv3 leaves it, the steps ROCTx ranges whose text is in their
    event's extdata; streams A and B two queues."""
    base = BASE_US * US
    writer = RocpdWriter(path, schema=schema, pid=1234)
    for name, start, end in CPU_STEPS:
        writer.marker(name, base + start * US, base + end * US, tid=42)
    for name, stream, start, end, _, l_start, l_end in KERNELS:
        launch = writer.api("hipLaunchKernel", base + l_start * US, base + l_end * US, tid=42)
        writer.dispatch(name, base + start * US, base + end * US, launch, tid=42,
                        queue=0x7F3A5C001000 if stream == "A" else 0x7F3A5C002000)
    return writer.close()


def analysis_of(path: Path):
    tables = read_path(path, READERS)
    found = analyse(tables.timelines)
    assert found is not None
    return found


def assert_scenario(found) -> None:
    row = found.merged
    assert (row.span_ns, row.busy_ns, row.idle_ns) == (422 * US, 352 * US, 70 * US)
    assert (row.gaps, row.gap_total_ns, row.largest_gap_ns) == (2, 70 * US, 50 * US)
    assert (row.concurrent_ns, row.max_concurrency, row.streams) == (50 * US, 2, 2)
    assert (row.communication_ns, row.hidden_communication_ns, row.compute_ns) == (200 * US, 50 * US, 202 * US)
    assert row.hidden_communication_percent == pytest.approx(25.0)
    launch = row.launch
    assert (launch.short_kernels, launch.short_kernel_basis) == (1, "launch call")
    assert launch.short_kernel_percent == pytest.approx(100 * 2 / 402)
    assert launch.launch_call_ns == (5 + 5 + 5 + 8) * US
    assert launch.queue_depth_mean == pytest.approx(492 / 432)
    assert launch.queue_depth_max == 2
    assert launch.launch_delay_mean_ns == pytest.approx(16.75 * US)
    assert not row.launch_bound
    [first, second] = found.gaps[:2]
    assert (first.start_ns, first.duration_ns, first.after, first.before) == (100 * US, 50 * US, "gemm_a", "gemm_b")
    assert (second.start_ns, second.duration_ns) == (400 * US, 20 * US)
    assert "tiny" == second.before
    steps = {s.step: s for s in found.steps}
    assert sorted(steps) == [5, 6]
    # the host-side ranges [-20, 260] and [260, 430], whatever the GPU side says; busy clipped to them
    assert found.step_source == "host-side step ranges"
    assert (steps[5].wall_ns, steps[5].gpu_busy_ns) == (280 * US, 210 * US)
    assert (steps[6].wall_ns, steps[6].gpu_busy_ns) == (170 * US, 142 * US)
    # communication inside step 5's window: the all-reduce's [200, 260]
    assert steps[5].communication_percent == pytest.approx(100 * 60 / 210)
    # a step's top kernel: of those the host launched inside its window (the all-reduce launched at 145)
    assert steps[5].top_kernel.startswith("ncclDevKernel") and steps[5].top_kernel_ns == 200 * US
    assert (steps[6].top_kernel, steps[6].top_kernel_ns) == ("tiny", 2 * US)
    # the last step may run until the profiler stopped (teardown): shown, but not named slowest
    assert [s.last for s in found.steps] == [False, True] and found.slowest_steps == (5,)
    assert not any(s.warmup for s in found.steps)  # two steps: none is called warm-up


def test_torch_trace(tmp_path):
    assert_scenario(analysis_of(torch_trace(tmp_path / "trace.json")))


def test_torch_trace_gzip_and_cpu_side_steps(tmp_path):
    plain = torch_trace(tmp_path / "plain.json", gpu_steps=False)
    packed = tmp_path / "trace.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    assert_scenario(analysis_of(packed))


def test_rocprofv3_csv(tmp_path):
    assert_scenario(analysis_of(rocprofv3_csv(tmp_path / "out")))


def test_rocprofv3_json(tmp_path):
    assert_scenario(analysis_of(rocprofv3_json(tmp_path / "4242_results.json")))


@pytest.mark.parametrize("schema", SCHEMA_VERSIONS)
def test_rocpd(tmp_path, schema):
    assert_scenario(analysis_of(rocpd(tmp_path / "1234_results.db", schema)))


def test_ranks_are_analysed_apart_and_merged(tmp_path):
    """Two ranks, the second 30 µs late on every event: per-rank rows, the merged row's span and busy
    time as unions on the host's clock (never sums of the ranks' spans: a job of two 422 µs ranks
    30 µs apart lasts 452 µs), GPU-time totals added, and each step as slow as its slowest rank."""
    torch_trace(tmp_path / "node1-rank0-11.pt.trace.json")
    torch_trace(tmp_path / "node1-rank1-12.pt.trace.json", shift_us=30)
    found = analysis_of(tmp_path)
    assert [(r.rank, r.host, r.busy_ns) for r in found.ranks] == [("0", "node1", 352 * US), ("1", "node1", 352 * US)]
    assert [r.span_ns for r in found.ranks] == [422 * US, 422 * US]
    # busy while either GPU is busy: rank 0's blocks and rank 1's, 30 µs later, joined
    assert (found.merged.rank, found.merged.busy_ns, found.merged.span_ns) == ("any GPU", 412 * US, 452 * US)
    # the job's GPU busy is the ranks' own: their mean and range, not the union above
    spread = found.ranks_busy
    assert (spread.ranks, spread.min_percent, spread.max_percent) == (2, 100 * 352 / 422, 100 * 352 / 422)
    assert found.merged.compute_ns == sum(r.compute_ns for r in found.ranks)
    assert found.merged.hidden_communication_percent == pytest.approx(25.0)
    assert len(found.curves) == 2 and all(0 < max(c.busy) <= 1 for c in found.curves)


def test_real_h200_torch_trace():
    """The H200 trace in tests/fixtures: busy time is the union of its kernels, computed here from
    the JSON itself."""
    path = FIXTURES / "nvidia-h200/torch_profiler_trace.json"
    events = json.loads(path.read_text())["traceEvents"]
    kernels = sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in events
                     if e.get("cat") == "kernel")
    busy, reach = 0, None
    for start, end in kernels:  # one stream here: the kernels do not overlap
        busy += end - max(start, reach or start)
        reach = end
    found = analysis_of(path)
    row = found.merged
    assert abs(row.busy_ns - busy) <= len(kernels)  # rounding of µs floats, at most 1 ns per kernel
    assert row.span_ns == pytest.approx(kernels[-1][1] - kernels[0][0], abs=2)
    assert row.streams == 1 and row.max_concurrency == 1 and row.communication_ns == 0
    assert row.launch.short_kernel_basis == "launch call"  # its cudaLaunchKernel calls carry correlation ids
    assert row.busy_percent > 99.9 and not row.launch_bound


def test_trace_without_timestamps_keeps_its_tables(tmp_path):
    trace = torch_trace(tmp_path / "trace.json")
    doc = json.loads(trace.read_text())
    for event in doc["traceEvents"]:
        event.pop("ts", None)
    trace.write_text(json.dumps(doc))
    report = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(trace), "--format",
                             "json"], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["timeline"] is None and summary["totals"]["dispatches"] == 4
    assert any("no timeline analysis" in n and "no timestamp" in n for n in summary["notes"]), summary["notes"]


def test_statistics_only_output_says_why_there_is_no_timeline(tmp_path):
    import shutil
    shutil.copy(FIXTURES / "rocprofv3-docs/hip_api_stats.csv", tmp_path / "1_kernel_stats.csv")
    with open(tmp_path / "1_kernel_stats.csv", "w") as fh:  # rocprofv3 --stats layout
        fh.write('"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n'
                 '"gemm",4,400,100.0,100.0,90,110,8.1\n')
    report = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(tmp_path), "--format",
                             "json"], capture_output=True, text=True, timeout=60)
    summary = json.loads(report.stdout)
    assert summary["timeline"] is None and summary["kernels"][0]["name"] == "gemm"
    assert any(n.startswith("no timeline analysis") for n in summary["notes"]), summary["notes"]


def test_report_formats_show_the_timeline(tmp_path):
    trace = torch_trace(tmp_path / "trace.json")
    for fmt, expected in (("table", "GPU busy 83.4 % of 422.0 µs"), ("md", "## Timeline"),
                          ("html", 'aria-label="GPU busy over time"')):
        done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(trace), "--format", fmt],
                              capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin"})
        assert done.returncode == 0 and expected in done.stdout, (fmt, done.stdout[-2000:], done.stderr)



def test_the_side_with_every_step_wins_over_a_lone_gpu_side_range():
    """torch 2.11 wrote ProfilerStep#0 alone on the GPU side and every step on the CPU side (a
    2 × H200 DDP trace, docs/validation.md): the steps come from the CPU side then."""
    from profilectl.model.timeline import Marker, rank_timeline
    from profilectl.analysis.timeline import steps_of
    cpu = [Marker(f"ProfilerStep#{n}", n * 100 * US, (n + 1) * 100 * US, False) for n in range(4)]
    timeline = rank_timeline("0", None, start=[10 * US, 110 * US, 210 * US, 310 * US],
                             end=[60 * US, 160 * US, 260 * US, 390 * US], stream=[0] * 4, kind=[0] * 4,
                             name=[0] * 4, names=["gemm"], streams=["7"],
                             markers=[*cpu, Marker("ProfilerStep#0", 0, 400 * US, True)])
    rows, source = steps_of(timeline)
    assert source == "host-side step ranges" and [r.step for r in rows] == [0, 1, 2, 3]
    assert [r.gpu_busy_ns for r in rows] == [50 * US, 50 * US, 50 * US, 80 * US] and rows[-1].last


def test_gpu_activity_without_duration_is_not_judged():
    from profilectl.model.timeline import rank_timeline
    found = analyse([rank_timeline("0", None, start=[100], end=[100], stream=[0], kind=[0], name=[0], names=["k"],
                                   streams=["7"])])
    assert found.merged.span_ns == 0 and not found.merged.launch_bound
    assert found.merged.verdict.startswith("no GPU time to judge")


@pytest.mark.parametrize("fast", [False, True], ids=["csv-module", "polars"])
def test_a_kernel_trace_without_correlation_ids_keeps_its_tables_and_timeline(tmp_path, monkeypatch, fast):
    """Hand-trimmed or older kernel traces may lack Correlation_Id: the tables and the timeline stay,
    only the launch linking goes; an empty Correlation_Id cell (the polars path reads it as null)
    is no traceback either."""
    from profilectl.formats import polars_csv
    if fast:
        monkeypatch.setattr(polars_csv, "FAST_PATH_MIN_BYTES", 0)
    folder = tmp_path / "trimmed"
    folder.mkdir()
    rows = [["Kernel_Name", "Agent_Id", "Queue_Id", "Start_Timestamp", "End_Timestamp", "Dispatch_Id"],
            ["gemm", "Agent 4", "1", str(1000 * US), str(1100 * US), "1"],
            ["relu", "Agent 4", "1", str(1300 * US), str(1320 * US), "2"]]
    (folder / "77_kernel_trace.csv").write_text("\n".join(",".join(r) for r in rows) + "\n")
    with_empty = [["Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp"],
                  ["gemm", "", str(2000 * US), str(2100 * US)]]
    (folder / "78_kernel_trace.csv").write_text("\n".join(",".join(r) for r in with_empty) + "\n")
    tables = read_path(folder, READERS)
    assert sorted(tables.kernels) == ["gemm", "relu"]
    found = analyse(tables.timelines)
    assert found is not None and found.merged.busy_ns == 220 * US
    assert found.merged.launch.short_kernel_basis == "5 µs"  # nothing links kernels to launches


def test_busy_curves_share_one_time_axis_and_keep_the_gaps():
    """Two short kernels 1 ms apart on rank 0, one late kernel on rank 1: both lanes span the job's
    first start to last end, and the idle millisecond shows as idle buckets."""
    from profilectl.model.timeline import rank_timeline
    zero = rank_timeline("0", None, start=[0, 1000 * US], end=[10 * US, 1010 * US], stream=[0, 0], kind=[0, 0],
                         name=[0, 0], names=["k"], streams=["7"])
    one = rank_timeline("1", None, start=[1500 * US], end=[1600 * US], stream=[0], kind=[0], name=[0], names=["k"],
                        streams=["7"])
    found = analyse([zero, one])
    first, second = found.curves
    assert (first.start_ns, first.bucket_ns) == (second.start_ns, second.bucket_ns) == (0, -(-1600 * US // 300))
    assert first.busy[0] == 1.0 and sum(1 for b in first.busy if b == 0) > 150  # the gap is there
    assert second.busy[0] == 0.0 and second.busy[-1] > 0.9  # rank 1 only works at the end (last bucket: past it)


def test_gpu_side_markers_of_a_few_microseconds_are_not_the_step():
    """PyTorch on ROCm writes GPU-side ProfilerStep#N of 16-18 µs for host steps of 16 ms: the step
    is the host side's, and its GPU busy time is what ran inside it (a real MI250 trace had "median
    17.12 µs" steps and `--steps 16:17` selecting nothing)."""
    from profilectl.analysis.steps import GPU_SIDE, HOST_SIDE, steps_of
    from profilectl.model.timeline import Marker
    host = [Marker(f"ProfilerStep#{n}", n * 16_000 * US, (n + 1) * 16_000 * US, False) for n in range(16, 20)]
    markers = [Marker(f"ProfilerStep#{n}", n * 16_000 * US + 500 * US, n * 16_000 * US + 517 * US, True)
               for n in range(16, 20)]
    found = steps_of(host + markers)
    assert found.source == HOST_SIDE and [w.wall_ns for w in found.windows] == [16_000 * US] * 4
    # one more GPU-side marker than host steps: still markers, not spans
    assert steps_of(host + markers + [Marker("ProfilerStep#20", 1, 18 * US, True)]).source == HOST_SIDE
    # GPU-side ranges that are real spans, more of them than the host marks: those
    spans = [Marker(f"ProfilerStep#{n}", n * 16_000 * US, n * 16_000 * US + 15_000 * US, True) for n in range(16, 21)]
    assert steps_of(host + spans).source == GPU_SIDE
    # a GPU-only trace (xprof's Steps line): its ranges
    assert len(steps_of(spans).windows) == 5 and "no host side" in steps_of(spans).source
    assert steps_of(host).warmup == 1 and steps_of(host).phase(3) == "last"
    assert [w.step for w in steps_of(host).steady] == [17, 18]
