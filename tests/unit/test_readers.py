"""Readers on the real tools' files (tests/fixtures: real outputs of the real tools) and on the older column sets."""

import csv
import dataclasses

import pytest

from profilectl.errors import FormatError
from profilectl.formats import counter_listing, ncu, rocprof_legacy, rocprofv3, torch_trace
from profilectl.read.summary import kernel_rows


def rows(stats):
    """Name statistics as the report's rows (dicts), heaviest first."""
    return [dataclasses.asdict(r) for r in kernel_rows(stats)]


def kernel_trace(paths, fast=None):
    return rows(rocprofv3.kernel_trace(paths, fast)[0])


def counters(values):
    return [dataclasses.asdict(v) for v in values]


def drop_columns(src, dst, drop):
    with open(src, newline="") as fh:
        rows = list(csv.DictReader(fh))
    keep = [c for c in rows[0] if c not in drop]
    with open(dst, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keep, extrasaction="ignore", quoting=csv.QUOTE_NONNUMERIC)
        writer.writeheader()
        writer.writerows(rows)
    return dst


def test_rocprofv3_kernel_trace_70(fixtures):
    found = kernel_trace([fixtures / "rocprofv3-docs/kernel_trace.csv"])
    by_name = {r["name"]: r for r in found}
    add = by_name["void addition_kernel<float>(float*, float const*, float const*, int, int)"]
    assert add["calls"] == 3 and add["total_ns"] == 34040 and add["min_ns"] == 9840 and add["max_ns"] == 12800
    assert found[0]["total_ns"] >= found[-1]["total_ns"]
    assert sum(r["percent"] for r in found) == pytest.approx(100.0)


def test_rocprofv3_kernel_trace_62_layout_without_stream_thread_dispatch(fixtures, tmp_path):
    old = drop_columns(fixtures / "rocprofv3-docs/kernel_trace.csv", tmp_path / "1_kernel_trace.csv",
                       {"Stream_Id", "Thread_Id", "Dispatch_Id"})
    assert kernel_trace([old]) == kernel_trace([fixtures / "rocprofv3-docs/kernel_trace.csv"])


def test_rocprofv3_counter_collection_19_and_15_columns(fixtures, tmp_path):
    new = fixtures / "rocprofv3-docs/counter_collection.csv"
    old = drop_columns(new, tmp_path / "1_counter_collection.csv",
                       {"Dispatch_Id", "Thread_Id", "Accum_VGPR_Count", "Start_Timestamp"})
    with open(old) as fh:
        assert len(next(csv.reader(fh))) == 15
    found = counters(rocprofv3.counter_collection([new]))
    older = counters(rocprofv3.counter_collection([old]))

    def values(rows):
        return [(r["kernel"], r["counter"], r["total"], r["dispatches"]) for r in rows]
    assert values(found) == values(older)
    assert {r["counter"] for r in found} == {"SQ_WAVES"} and found[0]["total"] == 16384.0
    # 7.0's rows carry the dispatch's timestamps (weights for means); 6.2's 15 columns do not
    assert all(r["timed"] == r["dispatches"] for r in found) and all(r["timed"] == 0 for r in older)


def test_rocprofv3_truncated_kernel_names(fixtures):
    # --truncate-kernels output: the same dispatches with short names
    found = kernel_trace([fixtures / "rocprofv3-docs/kernel_trace_truncated.csv"])
    assert {r["name"] for r in found} == {"addition_kernel", "subtract_kernel", "multiply_kernel", "divide_kernel"}


def test_rocprofv3_cut_off_file_names_file_and_line(fixtures, tmp_path):
    text = (fixtures / "rocprofv3-docs/kernel_trace.csv").read_text()
    cut = tmp_path / "123_kernel_trace.csv"
    cut.write_text(text[: text.index("\n", len(text) // 2) + 40])  # a run killed mid-write
    with pytest.raises(FormatError, match=r"123_kernel_trace.csv:\d+: truncated or malformed row"):
        kernel_trace([cut])


def test_rocprofv3_wrong_file_says_which_columns_are_missing(fixtures):
    with pytest.raises(FormatError, match="hip_trace.csv: not the expected file: missing column"):
        kernel_trace([fixtures / "rocprofv3-docs/hip_trace.csv"])


def test_rocprofv3_api_and_copies(fixtures):
    api = rows(rocprofv3.named_intervals([fixtures / "rocprofv3-docs/hip_runtime_trace.csv"], "Function"))
    assert api and all(r["calls"] >= 1 for r in api)
    copies = rows(rocprofv3.named_intervals([fixtures / "rocprofv3-docs/memory_copy_trace.csv"], "Direction"))
    assert "MEMORY_COPY_HOST_TO_DEVICE" in {r["name"] for r in copies}


def test_rocprofv3_list_avail(fixtures):
    names = counter_listing.rocprofv3((fixtures / "rocprofv3-docs/list-avail.txt").read_text()).names
    assert {"SQ_WAVES", "ALUStalledByLDS", "processor_id_low"} <= names


def test_ncu_csv_from_h200(fixtures):
    found = counters(ncu.metrics(ncu.launches(fixtures / "nvidia-h200/ncu_metrics.csv")))
    metrics = {r["counter"] for r in found}
    assert metrics == {"sm__warps_launched.sum", "sm__inst_executed.sum", "dram__bytes_read.sum"}
    read = [r for r in found if r["counter"] == "dram__bytes_read.sum"]
    assert read[0]["total"] == 10496.0  # "10,496" with a thousands separator
    assert all(r["unit"] for r in found)


def test_ncu_query_metrics_from_device(device_fixtures):
    names = ncu.available_metrics((device_fixtures / "ncu-query-metrics.names.txt").read_text())
    assert len(names) > 1000
    assert {"sm__warps_launched", "dram__bytes_read", "lts__t_sector_hit_rate"} <= names


def test_torch_trace_from_h200(fixtures):
    tables = torch_trace.read(fixtures / "nvidia-h200/torch_profiler_trace.json")
    gemm = rows(tables.kernels)[0]
    assert gemm["calls"] == 5 and "gemm" in gemm["name"]
    assert gemm["mean_ns"] == pytest.approx(2_669_075.4)
    assert "aten::matmul" in tables.operators


def test_torch_trace_truncated_json(tmp_path, fixtures):
    text = (fixtures / "nvidia-h200/torch_profiler_trace.json").read_text()
    broken = tmp_path / "trace.json"
    broken.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match=r"trace.json:\d+: not valid JSON"):
        torch_trace.read(broken)


def test_legacy_results_and_stats(tmp_path):
    results = tmp_path / "results.csv"
    results.write_text("Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,"
                       "sgpr,wave_size,sig,obj,SQ_WAVES,DispatchNs,BeginNs,EndNs,CompleteNs\n"
                       '0,"k1",0,0,0,1,1,64,64,0,0,8,0,16,64,0,0,16,0,100,300,310\n'
                       '1,"k1",0,0,1,1,1,64,64,0,0,8,0,16,64,0,0,16,0,400,500,510\n'
                       '2,"k2",0,0,2,1,1,64,64,0,0,8,0,16,64,0,0,4,0,600,1600,1610\n')
    kernels, values = rocprof_legacy.results(results)
    assert [(k["name"], k["calls"], k["total_ns"]) for k in rows(kernels)] == [("k2", 1, 1000.0), ("k1", 2, 300.0)]
    assert {(c.kernel, c.counter, c.total) for c in values} == {("k1", "SQ_WAVES", 32.0), ("k2", "SQ_WAVES", 4.0)}
    stats = tmp_path / "results.stats.csv"
    stats.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k2",1,1000,1000,76.9\n')
    assert rocprof_legacy.stats_file(stats)["k2"].calls == 1


def test_legacy_results_wrong_file(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(FormatError, match="not a rocprof results file"):
        rocprof_legacy.results(path)
