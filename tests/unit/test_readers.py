"""Readers on the real tools' files (../shared/fixtures) and on the older column sets."""

import csv

import pytest

from profilectl.formats import FormatError, ncu, rocprof_legacy, rocprofv3, torch_trace


def drop_columns(src, dst, drop):
    with open(src, newline="") as fh:
        rows = list(csv.DictReader(fh))
    keep = [c for c in rows[0] if c not in drop]
    with open(dst, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keep, extrasaction="ignore", quoting=csv.QUOTE_NONNUMERIC)
        writer.writeheader()
        writer.writerows(rows)
    return dst


def test_rocprofv3_kernel_trace_70(shared_fixtures):
    rows = rocprofv3.kernel_trace([shared_fixtures / "rocprofv3-docs/kernel_trace.csv"])
    by_name = {r["name"]: r for r in rows}
    add = by_name["void addition_kernel<float>(float*, float const*, float const*, int, int)"]
    assert add["calls"] == 3 and add["total_ns"] == 34040 and add["min_ns"] == 9840 and add["max_ns"] == 12800
    assert rows[0]["total_ns"] >= rows[-1]["total_ns"]
    assert sum(r["percent"] for r in rows) == pytest.approx(100.0)


def test_rocprofv3_kernel_trace_62_layout_without_stream_thread_dispatch(shared_fixtures, tmp_path):
    old = drop_columns(shared_fixtures / "rocprofv3-docs/kernel_trace.csv", tmp_path / "1_kernel_trace.csv",
                       {"Stream_Id", "Thread_Id", "Dispatch_Id"})
    assert rocprofv3.kernel_trace([old]) == rocprofv3.kernel_trace([shared_fixtures / "rocprofv3-docs/kernel_trace.csv"])


def test_rocprofv3_counter_collection_19_and_15_columns(shared_fixtures, tmp_path):
    new = shared_fixtures / "rocprofv3-docs/counter_collection.csv"
    old = drop_columns(new, tmp_path / "1_counter_collection.csv",
                       {"Dispatch_Id", "Thread_Id", "Accum_VGPR_Count", "Start_Timestamp"})
    with open(old) as fh:
        assert len(next(csv.reader(fh))) == 15
    rows = rocprofv3.counter_collection([new])
    assert rows == rocprofv3.counter_collection([old])
    assert {r["counter"] for r in rows} == {"SQ_WAVES"} and rows[0]["value"] == 16384.0


def test_rocprofv3_truncated_kernel_names(shared_fixtures):
    # --truncate-kernels output: the same dispatches with short names
    rows = rocprofv3.kernel_trace([shared_fixtures / "rocprofv3-docs/kernel_trace_truncated.csv"])
    assert {r["name"] for r in rows} == {"addition_kernel", "subtract_kernel", "multiply_kernel", "divide_kernel"}


def test_rocprofv3_cut_off_file_names_file_and_line(shared_fixtures, tmp_path):
    text = (shared_fixtures / "rocprofv3-docs/kernel_trace.csv").read_text()
    cut = tmp_path / "123_kernel_trace.csv"
    cut.write_text(text[: text.index("\n", len(text) // 2) + 40])  # a run killed mid-write
    with pytest.raises(FormatError, match=r"123_kernel_trace.csv:\d+: truncated or malformed row"):
        rocprofv3.kernel_trace([cut])


def test_rocprofv3_wrong_file_says_which_columns_are_missing(shared_fixtures):
    with pytest.raises(FormatError, match="hip_trace.csv: not the expected file: missing column"):
        rocprofv3.kernel_trace([shared_fixtures / "rocprofv3-docs/hip_trace.csv"])


def test_rocprofv3_api_and_copies(shared_fixtures):
    api = rocprofv3.api_trace([shared_fixtures / "rocprofv3-docs/hip_runtime_trace.csv"])
    assert api and all(r["calls"] >= 1 for r in api)
    copies = rocprofv3.memory_copies([shared_fixtures / "rocprofv3-docs/memory_copy_trace.csv"])
    assert "MEMORY_COPY_HOST_TO_DEVICE" in {r["name"] for r in copies}


def test_rocprofv3_list_avail(shared_fixtures):
    names = rocprofv3.available_counters((shared_fixtures / "rocprofv3-docs/list-avail.txt").read_text())
    assert {"SQ_WAVES", "ALUStalledByLDS", "processor_id_low"} <= names


def test_ncu_csv_from_h200(shared_fixtures):
    rows = ncu.metrics(shared_fixtures / "nvidia-h200/ncu_metrics.csv")
    metrics = {r["counter"] for r in rows}
    assert metrics == {"sm__warps_launched.sum", "sm__inst_executed.sum", "dram__bytes_read.sum"}
    read = [r for r in rows if r["counter"] == "dram__bytes_read.sum"]
    assert read[0]["value"] == 10496.0  # "10,496" with a thousands separator
    assert all(r["unit"] for r in rows)


def test_ncu_percentages_are_averaged_not_summed(tmp_path):
    path = tmp_path / "ncu.csv"
    path.write_text('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                    '"0","k","lts__t_sector_hit_rate.pct","%","60"\n"1","k","lts__t_sector_hit_rate.pct","%","80"\n'
                    '"0","k","dram__bytes_read.sum","byte","1,000"\n"1","k","dram__bytes_read.sum","byte","2,000"\n')
    values = {r["counter"]: r["value"] for r in ncu.metrics(path)}
    assert values == {"lts__t_sector_hit_rate.pct": 70.0, "dram__bytes_read.sum": 3000.0}


def test_ncu_query_metrics_from_device(device_fixtures):
    names = ncu.available_metrics((device_fixtures / "ncu-query-metrics.names.txt").read_text())
    assert len(names) > 1000
    assert {"sm__warps_launched", "dram__bytes_read", "lts__t_sector_hit_rate"} <= names


def test_torch_trace_from_h200(shared_fixtures):
    tables = torch_trace.tables(shared_fixtures / "nvidia-h200/torch_profiler_trace.json")
    gemm = tables["kernels"][0]
    assert gemm["calls"] == 5 and "gemm" in gemm["name"]
    assert gemm["mean_ns"] == pytest.approx(2_669_075.4)
    assert {r["name"] for r in tables["operators"]} >= {"aten::matmul"} or tables["operators"]


def test_torch_trace_truncated_json(tmp_path, shared_fixtures):
    text = (shared_fixtures / "nvidia-h200/torch_profiler_trace.json").read_text()
    broken = tmp_path / "trace.json"
    broken.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match=r"trace.json:\d+: not valid JSON"):
        torch_trace.tables(broken)


def test_legacy_results_and_stats(tmp_path):
    results = tmp_path / "results.csv"
    results.write_text("Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,"
                       "sgpr,wave_size,sig,obj,SQ_WAVES,DispatchNs,BeginNs,EndNs,CompleteNs\n"
                       '0,"k1",0,0,0,1,1,64,64,0,0,8,0,16,64,0,0,16,0,100,300,310\n'
                       '1,"k1",0,0,1,1,1,64,64,0,0,8,0,16,64,0,0,16,0,400,500,510\n'
                       '2,"k2",0,0,2,1,1,64,64,0,0,8,0,16,64,0,0,4,0,600,1600,1610\n')
    kernels, counters = rocprof_legacy.results(results)
    assert [(k["name"], k["calls"], k["total_ns"]) for k in kernels] == [("k2", 1, 1000.0), ("k1", 2, 300.0)]
    assert {(c["kernel"], c["counter"], c["value"]) for c in counters} == {("k1", "SQ_WAVES", 32.0), ("k2", "SQ_WAVES", 4.0)}
    stats = tmp_path / "results.stats.csv"
    stats.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k2",1,1000,1000,76.9\n')
    assert rocprof_legacy.stats_file(stats)[0]["calls"] == 1


def test_legacy_results_wrong_file(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(FormatError, match="not a rocprof results file"):
        rocprof_legacy.results(path)
