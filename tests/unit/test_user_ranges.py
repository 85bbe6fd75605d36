"""Traces of other tools read into the same tables (XLA/TSL traces of jax.profiler and TensorFlow),
ROCTx ranges as user annotations, and user ranges as bounds of a report: every number checked
against a hand computation on real files."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run
from rocpd_writer import SCHEMA_VERSIONS, RocpdWriter
from test_launchers import SYSTEM_PYTHON, needs_torch

from profilectl.analysis.windows import WindowRequest, restrict
from profilectl.backends import READERS
from profilectl.formats import jax_trace, roctx, torch_trace
from profilectl.formats.reader import claim
from profilectl.formats.rocprofv3 import Rocprofv3CsvReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
XLA_TRACE = FIXTURES / "xla-trace" / "aoberai.trace.json.gz"
ADAM = "void tensorflow::functor::ApplyAdamKernel<float>"


def test_an_xla_trace_goes_to_its_own_reader_not_to_the_torch_chrome_trace_reader():
    (reader, files), = claim([XLA_TRACE], READERS)
    assert reader.kind == "xla-trace" and files == [XLA_TRACE]
    # a torch.profiler trace is not claimed: it names no profiler plane
    assert not jax_trace.is_xla_trace(FIXTURES / "nvidia-h200" / "torch_profiler_trace.json")


def test_kernels_copies_and_ops_of_a_real_xla_trace_equal_a_hand_count():
    tables = jax_trace.read(XLA_TRACE)
    adam, = (stats for name, stats in tables.kernels.items() if name.startswith(ADAM))
    # by hand: the 18 ApplyAdamKernel events of "Stream #13(Compute)", their "dur" in µs as written
    # (2.3050000000000002 ...) rounded to the ns: 2305 + 2721 + 3073 + 3297 + 3425 + 3457 + 3618 + 3681
    # + 3745 + 3746 + 3970 + 4 x 4097 + 4098 + 4354 + 9860
    assert (adam.calls, adam.total, adam.minimum, adam.maximum) == (18, 71_738, 2305, 9860)
    # copies: the events of the Memcpy streams, by name
    assert {name: (s.calls, s.total) for name, s in tables.memory_copies.items()} == {
        "MemcpyH2D": (7, 160 + 352 + 480 + 800 + 864 + 1568 + 16486), "MemcpyD2H": (4, 992 + 1409 + 1472 + 1760)}
    # every kernel of the compute stream is a kernel; the derived lines are not counted again
    assert sum(s.calls for s in tables.kernels.values()) == 145
    assert tables.operators["ResourceApplyAdam"].calls == 18  # the "TensorFlow Ops" line: one op per kernel
    assert tables.operators["ResourceApplyAdam"].total == 71_738
    timeline, = tables.timelines
    assert len(timeline.start) == 145 + 11 and timeline.rank == "aoberai"
    assert [m.name for m in timeline.markers] == ["step#0"] and timeline.markers[0].on_gpu
    assert any("not CPU time" in note for note in tables.notes)


def test_report_of_a_tensorboard_profile_folder_in_a_real_process(tmp_path):
    run = tmp_path / "logs" / "plugins" / "profile" / "2021_06_16_00_30_02"
    run.mkdir(parents=True)
    (run / XLA_TRACE.name).write_bytes(XLA_TRACE.read_bytes())
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(tmp_path / "logs"), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["source"]["kind"] == "xla-trace"
    assert report["totals"]["dispatches"] == 145


MARKERS = FIXTURES / "rocprofv3-docs" / "marker_api_trace.csv"


def test_roctx_ranges_of_rocprofv3s_documented_marker_trace(tmp_path):
    trace = tmp_path / "717_marker_api_trace.csv"
    trace.write_bytes(MARKERS.read_bytes())
    rows = {row.name: row for row in Rocprofv3CsvReader().read([trace]).annotations}
    # the two roctxMark rows (start == end) are instants, not ranges
    assert set(rows) == {"hipLaunchKernel", "hipMemcpy", "hipLaunchKernel range"}
    launch, copy = rows["hipLaunchKernel"], rows["hipMemcpy"]
    assert launch.total_ns == 1520113901491622 - 1520113899684965
    assert copy.total_ns == 1520113901483408 - 1520113900141100
    # hipMemcpy's range is nested in hipLaunchKernel's on thread 717: its own time is the rest
    assert launch.self_ns == launch.total_ns - copy.total_ns
    # the Start/Stop range (thread 0) belongs to the process: nothing nests in it
    assert rows["hipLaunchKernel range"].self_ns == rows["hipLaunchKernel range"].total_ns
    assert {row.rank for row in rows.values()} == {"pid 717"}
    assert all(row.gpu_ns is None for row in rows.values())  # no HIP API trace: nothing to link


def _csv(path: Path, header_of: Path, rows: list[list[object]]) -> Path:
    """A file with the header of rocprofv3's documented sample and these rows."""
    header = header_of.read_text().splitlines()[0]
    path.write_text("\n".join([header] + [",".join(f'"{v}"' if isinstance(v, str) else str(v) for v in row)
                                          for row in rows]) + "\n")
    return path


def test_gpu_time_under_a_roctx_range_is_what_its_thread_launched_inside_it(tmp_path):
    docs = FIXTURES / "rocprofv3-docs"
    _csv(tmp_path / "9_marker_api_trace.csv", MARKERS, [
        ["MARKER_CORE_API", "outer", 9, 9, 1, 1000, 9000],
        ["MARKER_CORE_API", "inner", 9, 9, 2, 2000, 4000],
        ["MARKER_CORE_API", "other thread", 9, 10, 3, 1000, 9000],
        ["MARKER_CORE_API", "whole process", 9, 0, 4, 0, 20000]])
    _csv(tmp_path / "9_hip_api_trace.csv", docs / "hip_runtime_trace.csv", [
        ["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 9, 9, 11, 2500, 2600],   # inside inner (and outer)
        ["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 9, 9, 12, 5000, 5100],   # inside outer only
        ["HIP_RUNTIME_API_EXT", "hipMemcpyAsync", 9, 10, 13, 5000, 5100],   # thread 10
        ["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 9, 9, 14, 9500, 9600]])  # after outer
    kernel_row = ["KERNEL_DISPATCH", "Agent 4", 1, 1, 9, 1, 10, "k"]
    _csv(tmp_path / "9_kernel_trace.csv", docs / "kernel_trace.csv", [
        kernel_row + [11, 3000, 3300] + [0] * 11, kernel_row + [12, 6000, 6700] + [0] * 11,
        kernel_row + [14, 9700, 9750] + [0] * 11])
    _csv(tmp_path / "9_memory_copy_trace.csv", docs / "memory_copy_trace.csv", [
        ["MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE", 0, "Agent 0", "Agent 4", 13, 5200, 5400]])
    files = sorted(tmp_path.iterdir())
    rows = {row.name: row for row in Rocprofv3CsvReader().read(files).annotations}
    assert rows["inner"].gpu_ns == 300
    assert rows["outer"].gpu_ns == 300 + 700 and rows["outer"].self_ns == 8000 - 2000
    assert rows["other thread"].gpu_ns == 200
    assert rows["whole process"].gpu_ns == 300 + 700 + 200 + 50


def test_nested_ranges_of_one_name_count_each_call():
    ranges = [roctx.Range("f", 1, 0, 100), roctx.Range("f", 1, 10, 30), roctx.Range("g", 1, 40, 50)]
    row_f, row_g = roctx.annotation_rows("0", ranges, None)
    assert (row_f.calls, row_f.total_ns, row_f.self_ns) == (2, 120, 100 - 20 - 10 + 20)
    assert (row_g.calls, row_g.self_ns) == (1, 10)


JAX_CPU = FIXTURES / "xla-trace" / "jax-cpu" / "vm.trace.json.gz"


def test_a_real_jax_profiler_trace_of_xla_cpu_gives_hlo_ops_and_step_annotations():
    (reader, _), = claim([JAX_CPU], READERS)
    assert reader.kind == "xla-trace"
    tables = jax_trace.read(JAX_CPU)
    assert not tables.kernels and not tables.timelines  # XLA:CPU: no device plane
    # by hand: the three "ynn_fusion" events (args hlo_op) of the PjRt CPU client's thread
    fusion = tables.operators["ynn_fusion"]
    assert (fusion.calls, fusion.total) == (3, 605_351 + 295_701 + 194_006)
    # StepTraceAnnotation("train", step_num=i) x 3 on the python thread; my_phase (a plain
    # TraceAnnotation) nested in each is a TraceMe like any other: its time is not the step's own
    train, = tables.annotations
    assert (train.name, train.calls, train.total_ns) == ("train", 3, 814_551 + 493_826 + 314_439)
    assert train.self_ns == (814_551 - 808_246) + (493_826 - 488_632) + (314_439 - 309_966)
    assert train.gpu_ns is None
    assert any("no GPU timeline" in note for note in tables.notes)


# ---------------------------------------------------------------- --range NAME when profiling
RANGES_WORKLOAD = r"""
import torch
from torch.profiler import record_function
x = torch.randn(64, 64)
for step in range(5):
    with record_function("data"):
        y = x * 2
    if step in (1, 3):
        with record_function("fwd"):
            z = torch.relu(y @ y)
            with record_function("fwd"):  # nested in the first: the same window
                z = z + 1
    w = y.sum()
"""


@needs_torch
def test_torch_profiler_runs_only_inside_the_named_record_function_ranges(machine, tmp_path):
    script = tmp_path / "ranges.py"
    script.write_text(RANGES_WORKLOAD)
    result, run = json_run(machine, "trace", "--range", "fwd", "--", SYSTEM_PYTHON, str(script), timeout=300)
    assert result["exit_code"] == 0, result
    traces = sorted((run / "raw").glob("*.pt.trace.json"))
    # one trace per outermost "fwd" range: steps 1 and 3
    assert [t.name.split(".")[-4] for t in traces] == ["range1", "range2"]
    for trace in traces:
        doc = json.loads(trace.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc  # torch 1.13 without Kineto: a bare list
        names = [e["name"] for e in events if e.get("ph") == "X"]
        assert names.count("fwd") == 2 and "aten::mm" in names  # the range, its nested one, its work
        assert "data" not in names  # outside the window
    done = cli(machine, "trace", "--range", "never entered", "--", SYSTEM_PYTHON, str(script), timeout=300)
    assert done.returncode != 0 and "a --range of that name" in done.stderr, done.stderr


def test_range_becomes_rocprofv3s_selected_regions_driven_by_the_hook(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2")
    done = cli(machine, "trace", "--dry-run", "--json", "--range", "fwd", "--", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    argv, env = plan["phases"][0]["steps"][0]["argv"], plan["phases"][0]["environment"]
    assert "--selected-regions" in argv
    assert env["PROFILECTL_RANGE"] == "fwd" and env["PROFILECTL_STEP_ACTION"] == "roctx"
    # a native program: rocprofv3 cannot select a ROCTx range by name
    done = cli(machine, "trace", "--range", "fwd", "--", "/bin/true")
    assert done.returncode == 2 and "selects no ROCTx range by name" in done.stderr, done.stderr
    done = cli(machine, "trace", "--range", "fwd", "--steps", "1:3", "--", *WORKLOAD)
    assert done.returncode == 2 and "--range with --steps" in done.stderr, done.stderr


def test_rocprofv3_before_7_0_has_no_selected_regions_for_a_range(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="6.4.1")
    done = cli(machine, "trace", "--range", "fwd", "--", *WORKLOAD)
    assert done.returncode == 2 and "--selected-regions" in done.stderr, done.stderr


# ---------------------------------------------------------------- report --range / --steps
NS_TRACE = FIXTURES / "hta" / "ns_resolution_rank-0.pt.trace.json.gz"


def test_a_range_window_holds_the_gpu_time_launched_inside_it():
    tables = torch_trace.read(NS_TRACE)
    rows = {row.name: row for row in tables.annotations}
    forward = restrict(tables, WindowRequest(range_name="## forward ##"))
    gpu = sum(s.total for s in forward.kernels.values()) + sum(s.total for s in forward.memory_copies.values())
    # the forward ranges launch from the main thread only: the window's GPU time is the table's, to the ns
    assert gpu == rows["## forward ##"].gpu_ns == 30_074_487
    assert sum(s.calls for s in forward.kernels.values()) == 299
    timeline, = forward.timelines
    assert len(timeline.start) == 299 + sum(s.calls for s in forward.memory_copies.values())
    # --steps 101:102 is ProfilerStep#101's window; a step mark by its name without the number selects every step
    step = restrict(tables, WindowRequest(steps=(101, 102)))
    by_name = restrict(tables, WindowRequest(range_name="ProfilerStep#101"))
    assert {n: s.total for n, s in step.kernels.items()} == {n: s.total for n, s in by_name.kernels.items()}
    every = restrict(tables, WindowRequest(range_name="ProfilerStep"))
    assert sum(s.calls for s in every.kernels.values()) >= sum(s.calls for s in step.kernels.values())
    assert any(note.startswith("--range ## forward ##:") for note in forward.notes)


def _report(*args):
    return subprocess.run([sys.executable, "-m", "profilectl", "report", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_report_range_and_steps_in_a_real_process():
    done = _report(NS_TRACE, "--range", "## forward ##", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["totals"]["dispatches"] == 299
    assert any("window(s)" in note for note in report["notes"])
    done = _report(NS_TRACE, "--range", "no such range")
    assert done.returncode == 2 and "no range named 'no such range' in these traces" in done.stderr
    assert "'## forward ##'" in done.stderr  # what the trace does have, named in the same line
    assert len(done.stderr.strip().splitlines()) == 1
    done = _report(NS_TRACE, "--steps", "5:2")
    assert done.returncode == 2 and "the first step must come before the end" in done.stderr
    done = _report(NS_TRACE, "--steps", "1:2", "--range", "x")
    assert done.returncode == 2 and "not allowed with" in done.stderr
    done = _report(XLA_TRACE, "--steps", "0:1", "--format", "json")  # the device's Steps line
    # the kernels launched inside the step (its host launch calls, linked by correlation_id): 144 of
    # the 145, one launched just before the step's device-side span begins
    assert done.returncode == 0 and json.loads(done.stdout)["totals"]["dispatches"] == 144


def test_report_range_of_a_roctx_range(tmp_path):
    test_gpu_time_under_a_roctx_range_is_what_its_thread_launched_inside_it(tmp_path)  # writes the files
    done = _report(tmp_path, "--range", "inner", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # inside "inner" [2000, 4000] the launch at 2500 (correlation 11): its kernel of 300 ns
    assert (report["totals"]["dispatches"], report["totals"]["gpu_time_ns"]) == (1, 300)
    done = _report(tmp_path, "--range", "whole process", "--format", "json")
    assert json.loads(done.stdout)["totals"]["dispatches"] == 3


def _rocpd_with_markers(path: Path, schema: str = "3.0.0") -> Path:
    """The same story as the CSV test, in a rocpd database as rocprofv3 writes it
    (tests/rocpd_writer.py): ROCTx ranges as roctxThreadRangeA regions with their text in the
    event's extdata, kernels and the copy linked to their calls by stack_id, and every external
    correlation id 0 (without --kernel-rename): a link by correlation_id would give every range the
    GPU time of every kernel."""
    writer = RocpdWriter(path, schema=schema, pid=9)
    for tid, message, a, b in ((9, "outer", 1000, 9000), (9, "inner", 2000, 4000), (10, "other thread", 1000, 9000)):
        writer.marker(message, a, b, tid)
    launches = {name: writer.api("hipLaunchKernel" if name != 13 else "hipMemcpyAsync", a, b, tid)
                for name, tid, a, b in ((11, 9, 2500, 2600), (12, 9, 5000, 5100), (13, 10, 5000, 5100), (14, 9, 9500, 9600))}
    for call, a, b in ((11, 3000, 3300), (12, 6000, 6700), (14, 9700, 9750)):
        writer.dispatch("k", a, b, launches[call], tid=9)
    writer.copy("MEMORY_COPY_HOST_TO_DEVICE", 5200, 5400, launches[13], tid=10)
    return writer.close()


@pytest.mark.parametrize("schema", SCHEMA_VERSIONS)
def test_roctx_ranges_of_a_rocpd_database(tmp_path, schema):
    from profilectl.formats.rocpd import RocpdReader
    path = _rocpd_with_markers(tmp_path / "9_results.db", schema)
    tables = RocpdReader().read_file(path)
    rows = {row.name: row for row in tables.annotations}
    assert set(rows) == {"outer", "inner", "other thread"}
    assert (rows["outer"].total_ns, rows["outer"].self_ns, rows["outer"].gpu_ns) == (8000, 6000, 300 + 700)
    assert rows["inner"].gpu_ns == 300 and rows["other thread"].gpu_ns == 200
    assert sum(s.calls for s in tables.kernels.values()) == 3


def test_a_user_annotation_as_step_marks_in_a_real_process():
    done = _report(NS_TRACE, "--step-mark", "## forward ##", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    walls = sorted(row["wall_ns"] for row in report["timeline"]["steps"])
    rows = {row.name: row for row in torch_trace.read(NS_TRACE).annotations}
    # the two "## forward ##" ranges are steps 0 and 1: their walls are the range's min and max
    assert walls == [rows["## forward ##"].min_ns, rows["## forward ##"].max_ns]
    # with --steps: one forward range. The trace's last launch call (…537,100,926 ns) comes before the
    # second forward range begins (…537,598,726): every kernel of the forward ranges was launched in
    # the first, and a window that launched nothing is one line naming the steps there are (exit 2)
    first = json.loads(_report(NS_TRACE, "--step-mark", "## forward ##", "--steps", "0:1", "--format", "json").stdout)
    assert first["totals"]["dispatches"] == 299
    second = _report(NS_TRACE, "--step-mark", "## forward ##", "--steps", "1:2", "--format", "json")
    assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert "launched no GPU activity" in second.stderr and "steps are 0-1" in second.stderr


def test_jax_profilers_perfetto_copy_beside_the_trace_is_not_read_twice():
    folder = JAX_CPU.parent  # vm.trace.json.gz and perfetto_trace.json.gz of the same run
    groups = claim(sorted(p for p in folder.iterdir() if p.name.endswith(".gz")), READERS)
    assert [(reader.kind, sorted(f.name for f in files)) for reader, files in groups] == [
        ("xla-trace", ["perfetto_trace.json.gz", "vm.trace.json.gz"])]
    reader, files = groups[0]
    tables = reader.read(files)
    assert tables.operators["ynn_fusion"].calls == 3 and tables.annotations[0].calls == 3
    alone = reader.read([folder / "perfetto_trace.json.gz"])  # by itself it is the trace
    assert alone.operators["ynn_fusion"].calls == 3


def test_a_cut_or_malformed_xla_trace_is_one_line(tmp_path):
    import pytest
    from profilectl.errors import FormatError
    cut = tmp_path / "host.trace.json.gz"
    cut.write_bytes(XLA_TRACE.read_bytes()[:9000])
    with pytest.raises(FormatError, match="host.trace.json.gz: cannot read"):
        jax_trace.read(cut)
    bad = tmp_path / "bad.trace.json"
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "X", "pid": 1, "tid": 2, "ts": "abc", "dur": 1, "name": "k"}]}))
    assert jax_trace.is_xla_trace(bad)
    with pytest.raises(FormatError, match=r"bad.trace.json: event 1: not a time: 'abc'"):
        jax_trace.read(bad)


def test_the_python_api_opens_a_trace_restricted_to_a_range():
    import profilectl
    run = profilectl.open(NS_TRACE, range_name="## forward ##")
    assert sum(k.calls for k in run.summary.kernels) == 299
    whole = profilectl.open(NS_TRACE)
    assert sum(k.calls for k in whole.summary.kernels) > 299
