"""report / ls / compare on runs and on files the tools wrote by hand."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support import REPO
from profilectl.backends import READERS
from profilectl.errors import FormatError
from profilectl.formats import polars_csv, rocpd, rocprofv3
from profilectl.formats.reader import recognised
from profilectl.read import load
from profilectl.read.summary import kernel_rows

sys.path.insert(0, str(REPO / "bench"))
import gen_trace  # noqa: E402  (the benchmark's trace generator)
from rocpd_writer import SCHEMA_VERSIONS, RocpdWriter  # noqa: E402


def cli(*args, env_extra=None):
    import os
    env = dict(os.environ, COLUMNS="200", **(env_extra or {}))
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True, env=env)


def report_json(path):
    done = cli("report", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_report_on_the_documented_rocprofv3_outputs(fixtures):
    summary = report_json(fixtures / "rocprofv3-docs")
    names = {k["name"] for k in summary["kernels"]}
    assert "void addition_kernel<float>(float*, float const*, float const*, int, int)" in names
    assert {c["name"] for c in summary["memory_copies"]} == {"MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY_DEVICE_TO_HOST"}
    assert summary["counters_by_kernel"][0]["SQ_WAVES"] == 16384.0
    assert summary["totals"]["dispatches"] == sum(k["calls"] for k in summary["kernels"])


def test_report_on_ncu_and_torch_files(fixtures):
    ncu = report_json(fixtures / "nvidia-h200/ncu_metrics.csv")
    assert {"sm__warps_launched.sum", "dram__bytes_read.sum"} <= set(ncu["counters_by_kernel"][0])
    torch = report_json(fixtures / "nvidia-h200/torch_profiler_trace.json")
    assert torch["kernels"][0]["calls"] == 5 and torch["operators"]
    assert torch["perfetto_trace"].endswith("torch_profiler_trace.json")


def test_report_on_legacy_results(tmp_path):
    (tmp_path / "results.csv").write_text("Index,KernelName,gpu-id,BeginNs,EndNs,SQ_WAVES\n0,k1,0,100,300,16\n1,k2,0,400,1400,4\n")
    (tmp_path / "results.stats.csv").write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k2",1,1000,1000,83.3\n')
    summary = report_json(tmp_path)
    assert [k["name"] for k in summary["kernels"]] == ["k2", "k1"]
    assert {r["kernel"]: r["SQ_WAVES"] for r in summary["counters_by_kernel"]} == {"k1": 16.0, "k2": 4.0}


def multi_rank_tree(root: Path, fixtures) -> Path:
    for host, pid in (("node1", 111), ("node1", 112), ("node2", 211)):
        (root / host).mkdir(parents=True, exist_ok=True)
        shutil.copy(fixtures / "rocprofv3-docs/kernel_trace.csv", root / host / f"{pid}_kernel_trace.csv")
    return root


def test_multi_rank_outputs_are_merged_and_reported_per_rank(tmp_path, fixtures):
    single = report_json(fixtures / "rocprofv3-docs/kernel_trace.csv")
    merged = report_json(multi_rank_tree(tmp_path / "out", fixtures))
    assert [(r["rank"], r["host"]) for r in merged["ranks"]] == [("pid 111", "node1"), ("pid 112", "node1"),
                                                                 ("pid 211", "node2")]
    assert all(r["dispatches"] == single["totals"]["dispatches"] for r in merged["ranks"])
    first = {k["name"]: k for k in single["kernels"]}
    for kernel in merged["kernels"]:
        assert kernel["calls"] == 3 * first[kernel["name"]]["calls"]
        assert kernel["std_ns"] == pytest.approx(first[kernel["name"]]["std_ns"])  # identical ranks: same spread


def test_fast_engine_and_csv_module_agree(tmp_path, fixtures):
    assert polars_csv.fast_engine_available()
    path = multi_rank_tree(tmp_path, fixtures) / "node1/111_kernel_trace.csv"
    fast, slow = (kernel_rows(rocprofv3.kernel_trace([path], fast=f)[0]) for f in (True, False))
    assert [k.name for k in fast] == [k.name for k in slow]
    for a, b in zip(fast, slow):
        assert a.calls == b.calls and (a.total_ns, a.mean_ns, a.std_ns) == pytest.approx((b.total_ns, b.mean_ns, b.std_ns))
    text = path.read_text()
    path.write_text(text[: text.index("\n", len(text) // 2) + 40])
    for fast_path in (True, False):
        with pytest.raises(FormatError, match=r"111_kernel_trace.csv:\d+: truncated or malformed row"):
            rocprofv3.kernel_trace([path], fast=fast_path)


def test_rocpd_database(tmp_path):
    rng = np.random.default_rng(1)
    names = gen_trace.kernel_names(20, rng)
    gen_trace.write_rocpd(tmp_path / "4242_results.db", 5000, names, rng)
    assert rocpd.is_rocpd(tmp_path / "4242_results.db")
    summary = report_json(tmp_path)
    assert summary["source"]["kind"] == "rocpd"
    assert summary["totals"]["dispatches"] == 5000 and summary["totals"]["kernels"] <= 20
    assert summary["memory_copies"][0]["name"] == "MEMORY_COPY_HOST_TO_DEVICE"
    k = summary["kernels"][0]
    assert k["min_ns"] <= k["mean_ns"] <= k["max_ns"] and k["std_ns"] > 0


def test_not_a_rocpd_database(tmp_path):
    import sqlite3
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.commit()
    done = cli("report", str(tmp_path))
    assert done.returncode == 2 and "no profiler output recognised" in done.stderr


def test_bare_directory_summary_is_cached_outside_the_users_files(tmp_path, fixtures, monkeypatch):
    out = multi_rank_tree(tmp_path / "out", fixtures)
    before = sorted(p.name for p in out.rglob("*"))
    assert load.load(out).cache_hit is False
    assert load.load(out).cache_hit is True
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing written beside the user's files
    extra = out / "node3"
    extra.mkdir()
    shutil.copy(out / "node1/111_kernel_trace.csv", extra / "311_kernel_trace.csv")
    changed = load.load(out)
    assert changed.cache_hit is False and len(changed.ranks) == 4


def test_report_of_a_run_uses_its_stored_summary(machine, tmp_path):
    import os
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root))
    traces = tmp_path / "traces"
    subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "counters", "--fallback", "--traces-dir", str(traces),
                    "--", sys.executable, "-c", "print('hi')"], env=env, check=True, capture_output=True)
    run = next(traces.iterdir())
    shutil.rmtree(run / "raw")  # the report needs only manifest.json and summary.json
    summary = report_json(run)
    assert summary["run"]["service"] == "counters" and summary["run"]["backend"] == "timing"
    assert any("no GPU found" in f["reason"] for f in summary["run"]["fallbacks"])
    runs = summary["timing"]["runs"]  # sized to the workload: a short program runs 3 to 30 times
    assert 3 <= runs <= 30
    table = cli("report", str(run))
    assert "fell back from counters" in table.stdout and f"Timing ({runs} runs)" in table.stdout


def start_manifest(service="trace", backend="rocprofv3", **extra):
    """A manifest as execute writes it at the start of a run (status running)."""
    return {"schema_version": 1, "profilectl_version": "0.1.0", "service": service, "backend": backend,
            "reason": "r", "fallbacks": [], "tool": None, "argv": ["rocprofv3", "--", "app"], "phases": [],
            "workload": ["app"], "workload_source": "argument", "counter_set": None, "gpu": None,
            "started_at": "2026-11-21T00:00:00.000Z", "status": "running", **extra}


def test_killed_run_without_summary_is_summarised_from_raw(tmp_path, fixtures):
    run = tmp_path / "20261121T000000Z-trace-abcdef"
    (run / "raw/host").mkdir(parents=True)
    shutil.copy(fixtures / "rocprofv3-docs/kernel_trace.csv", run / "raw/host/99_kernel_trace.csv")
    (run / "manifest.json").write_text(json.dumps(start_manifest()))
    summary = report_json(run)
    assert summary["run"]["status"] == "running" and summary["kernels"] and "did not finish" in summary["notes"][0]


def test_html_report_is_self_contained(tmp_path, fixtures):
    out = tmp_path / "report.html"
    done = cli("report", str(multi_rank_tree(tmp_path / "o", fixtures)), "--format", "html", "-o", str(out))
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert html.count("<svg") >= 2 and 'aria-label="top kernels"' in html and 'aria-label="share of GPU time"' in html
    assert "<script" not in html and "http://" not in html and "https://" not in html and "<link" not in html
    assert "divide_kernel" in html and "Per rank" in html


def test_markdown_and_csv_formats(fixtures):
    md = cli("report", str(fixtures / "rocprofv3-docs"), "--format", "md").stdout
    assert md.startswith("# profilectl — rocprofv3-csv") and "| name | calls |" in md
    csv_text = cli("report", str(fixtures / "rocprofv3-docs"), "--format", "csv").stdout
    assert csv_text.splitlines()[0] == "name,calls,total_ns,mean_ns,min_ns,max_ns,std_ns,percent"


def test_compare_two_outputs(tmp_path, fixtures):
    a = fixtures / "rocprofv3-docs/kernel_trace.csv"
    b_dir = tmp_path / "b"
    b_dir.mkdir()
    rows = a.read_text().splitlines()
    header, body = rows[0], rows[1:]
    cols = header.replace('"', "").split(",")
    start, end = cols.index("Start_Timestamp"), cols.index("End_Timestamp")
    faster = []
    for line in body:
        import csv
        fields = next(csv.reader([line]))
        if "divide" in fields[cols.index("Kernel_Name")]:
            continue  # B has no divide kernel
        fields[end] = str(int(fields[start]) + (int(fields[end]) - int(fields[start])) // 2)  # twice as fast
        faster.append(",".join(f'"{f}"' for f in fields))
    faster.append('"KERNEL_DISPATCH","Agent 4",1,1,1,99,99,"new_kernel",99,100,200,0,0,8,0,16,64,1,1,1024,1024,1')
    (b_dir / "1_kernel_trace.csv").write_text("\n".join([header] + faster) + "\n")
    done = cli("compare", str(a), str(b_dir), "--format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert all(r["speedup"] == pytest.approx(2.0, rel=0.01) for r in result["kernels"])
    assert [r["name"] for r in result["only_in_b"]] == ["new_kernel"]
    assert result["only_in_a"][0]["name"].startswith("divide_kernel")
    table = cli("compare", str(a), str(b_dir))
    assert "speedup" in table.stdout and "Only in B" in table.stdout


def test_ls_lists_runs_newest_first(machine, tmp_path):
    import os
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root))
    traces = tmp_path / "traces"
    for code in ("print(1)", "import sys; sys.exit(2)"):
        subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "profile", "--repeat", "1", "--traces-dir",
                        str(traces), "--", sys.executable, "-c", code], env=env, capture_output=True)
    listed = json.loads(cli("ls", str(traces), "--json").stdout)
    assert [r["status"] for r in listed] == ["failed", "ok"]
    assert listed[0]["started_at"] >= listed[1]["started_at"]
    assert "failed" in cli("ls", str(traces)).stdout


@pytest.mark.parametrize("args", [["report", "/does/not/exist"], ["report", ".", "--format", "pdf"],
                                  ["ls", "/does/not/exist"], ["compare", "/nope", "/nada"], ["report", "."]])
def test_bad_report_input_is_one_line_exit_2(args, tmp_path):
    if args[-1] == ".":
        args = [a if a != "." else str(tmp_path) for a in args]
    done = cli(*args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_truncated_file_is_a_one_line_error_naming_file_and_line(tmp_path, fixtures):
    text = (fixtures / "rocprofv3-docs/kernel_trace.csv").read_text()
    (tmp_path / "7_kernel_trace.csv").write_text(text[: text.index("\n", len(text) // 2) + 40])
    done = cli("report", str(tmp_path))
    assert done.returncode == 2 and "7_kernel_trace.csv:" in done.stderr and "truncated" in done.stderr


def test_detect_ignores_unrelated_files(tmp_path, fixtures):
    shutil.copy(fixtures / "rocprofv3-docs/kernel_trace.csv", tmp_path / "5_kernel_trace.csv")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "data.json").write_text('{"a": 1}')
    assert [reader.kind for reader, _ in recognised(tmp_path, READERS)] == ["rocprofv3-csv"]


def test_rocprofv3_json_output(tmp_path):
    fixture = Path(__file__).resolve().parents[1] / "fixtures/rocprofv3-json/4242_results.json"
    summary = report_json(fixture)
    assert summary["source"]["kind"] == "rocprofv3-json"
    kernels = {k["name"]: k for k in summary["kernels"]}
    add = kernels["void addition_kernel<float>(float*, float const*, float const*, int, int)"]
    assert add["calls"] == 2 and add["total_ns"] == 12800 + 9840
    assert {a["name"] for a in summary["api"]} == {"hipMalloc", "hipLaunchKernel"}
    assert summary["memory_copies"][0]["name"] == "MEMORY_COPY_HOST_TO_DEVICE"
    # two processes' JSON files merge like CSV ranks do
    for pid in (1, 2):
        shutil.copy(fixture, tmp_path / f"{pid}_results.json")
    merged = report_json(tmp_path)
    assert {k["name"]: k["calls"] for k in merged["kernels"]}[add["name"]] == 4
    broken = tmp_path / "3_results.json"
    broken.write_text(fixture.read_text()[:900])
    done = cli("report", str(broken))
    assert done.returncode == 2 and "3_results.json" in done.stderr and "not valid JSON" in done.stderr


def rocpd_db(path: Path, schema: str) -> Path:
    """A small rocpd database as rocprofv3 writes it (tests/rocpd_writer.py): two HIP calls, three
    dispatches with SQ_WAVES values on their events, a memory copy and a ROCTx range (an annotation,
    not an API call)."""
    writer = RocpdWriter(path, schema=schema, pid=77)
    writer.marker("forward", 80, 995, tid=5)
    launch = writer.api("hipLaunchKernel", 90, 95, tid=5)
    copy = writer.api("hipMemcpy", 900, 990, tid=5)
    for i, (kernel, start, end) in enumerate((("gemm", 100, 400), ("gemm", 500, 700), ("relu", 800, 850)), 1):
        writer.counter(writer.dispatch(kernel, start, end, launch, tid=5), "SQ_WAVES", 64.0 * i)
    writer.copy("MEMORY_COPY_HOST_TO_DEVICE", 10, 60, copy, tid=5)
    return writer.close()


@pytest.mark.parametrize("schema", SCHEMA_VERSIONS)
def test_rocpd_kernels_regions_copies_counters_in_every_schema(tmp_path, schema):
    rocpd_db(tmp_path / "77_results.db", schema)
    summary = report_json(tmp_path)
    kernels = {k["name"]: k for k in summary["kernels"]}
    assert (kernels["gemm"]["calls"], kernels["gemm"]["total_ns"], kernels["gemm"]["max_ns"]) == (2, 500, 300)
    assert kernels["relu"]["total_ns"] == 50
    assert {a["name"]: a["total_ns"] for a in summary["api"]} == {"hipLaunchKernel": 5, "hipMemcpy": 90}
    assert summary["memory_copies"][0] == pytest.approx({**summary["memory_copies"][0], "total_ns": 50})
    counters = {r["kernel"]: r["SQ_WAVES"] for r in summary["counters_by_kernel"]}
    assert counters == {"gemm": 64.0 + 128.0, "relu": 192.0}


def test_report_on_a_traces_folder_points_to_ls(machine, tmp_path):
    import os
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root))
    traces = tmp_path / "traces"
    subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "profile", "--repeat", "1", "--traces-dir",
                    str(traces), "--", sys.executable, "-c", "pass"], env=env, check=True, capture_output=True)
    done = cli("report", str(traces))
    assert done.returncode == 2 and "traces folder with 1 runs" in done.stderr and "profilectl ls" in done.stderr


def test_compare_across_tools_by_function_name(tmp_path):
    torch_dir, rocprof_dir = tmp_path / "torch", tmp_path / "rocprof"
    torch_dir.mkdir()
    rocprof_dir.mkdir()
    torch_name = "void at::native::(anonymous namespace)::fill_kernel<float, 4>(int, at::native::Array<char*, 1>)"
    events = [{"ph": "X", "cat": "kernel", "name": torch_name, "ts": i * 10, "dur": 4, "pid": 1, "tid": 1} for i in range(3)]
    events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "ts": 99, "dur": 5, "pid": 1, "tid": 1})
    (torch_dir / "trace.json").write_text(json.dumps({"traceEvents": events}))
    header = '"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
    rows = "".join(f'"KERNEL_DISPATCH","Agent 4",1,1,"void at::<unnamed>::fill_kernel<float, 4, at::Array<char*, 1> >(int, T2)",{i},{i * 100},{i * 100 + 2000}\n'
                   for i in range(3))
    (rocprof_dir / "9_kernel_trace.csv").write_text(header + rows)
    exact = json.loads(cli("compare", str(torch_dir), str(rocprof_dir), "--format", "json").stdout)
    assert exact["totals"]["matched"] == 0
    done = cli("compare", str(torch_dir), str(rocprof_dir), "--match", "base", "--format", "json")
    assert done.returncode == 0, done.stderr
    base = json.loads(done.stdout)
    assert base["match"] == "base" and [k["name"] for k in base["kernels"]] == ["fill_kernel"]
    assert base["kernels"][0]["speedup"] == pytest.approx(4000 * 3 / (2000 * 3))
