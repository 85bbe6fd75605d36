"""Counter values per kernel, aggregated as their meaning asks (profiling/counters/_aggregation.yaml):
counts and bytes summed over dispatches; percentages, ratios, occupancy and rates averaged, weighted
by each dispatch's duration (by dispatch where the tool gives no duration). Small captures in each
tool's real layout, read through `profilectl report` like a user's folder."""

import json
import subprocess
import sys

import pytest

from profilectl import countersets
from support import REPO


def report(path):
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path), "--format", "json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def by_kernel(summary):
    return {row["kernel"]: row for row in summary["counters_by_kernel"]}


ROCPROFV3_70 = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id", "Grid_Size",
                "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                "Accum_VGPR_Count", "SGPR_Count", "Counter_Name", "Counter_Value", "Start_Timestamp", "End_Timestamp"]


def counter_csv(path, rows, header=ROCPROFV3_70):
    """rows: (dispatch, kernel, counter, value, start, end)"""
    lines = [",".join(f'"{h}"' for h in header)]
    for dispatch, kernel, counter, value, start, end in rows:
        full = {"Correlation_Id": dispatch, "Dispatch_Id": dispatch, "Agent_Id": '"Agent 1"', "Queue_Id": 1,
                "Process_Id": 7, "Thread_Id": 7, "Grid_Size": 1024, "Kernel_Id": 1, "Kernel_Name": f'"{kernel}"',
                "Workgroup_Size": 64, "LDS_Block_Size": 0, "Scratch_Size": 0, "VGPR_Count": 8, "Accum_VGPR_Count": 0,
                "SGPR_Count": 16, "Counter_Name": f'"{counter}"', "Counter_Value": value, "Start_Timestamp": start,
                "End_Timestamp": end}
        lines.append(",".join(str(full[h]) for h in header))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rocprofv3_ratios_are_weighted_by_duration_counts_are_summed(tmp_path):
    counter_csv(tmp_path / "7_counter_collection.csv", [
        (1, "k", "MemUnitBusy", 80.0, 0, 100), (1, "k", "SQ_WAVES", 10, 0, 100),
        (2, "k", "MemUnitBusy", 40.0, 200, 500), (2, "k", "SQ_WAVES", 20, 200, 500),
        (3, "k", "OccupancyPercent", 90.0, 600, 700), (4, "k", "OccupancyPercent", 79.6, 800, 900),
    ])
    summary = report(tmp_path)
    k = by_kernel(summary)["k"]
    assert k["MemUnitBusy"] == pytest.approx((80 * 100 + 40 * 300) / 400)  # 50 %, not 120 %
    assert k["OccupancyPercent"] == pytest.approx(84.8)  # not 169.6 %
    assert k["SQ_WAVES"] == 30
    legend = summary["counter_aggregation"]
    assert legend["MemUnitBusy"] == "mean weighted by dispatch duration" and legend["SQ_WAVES"] == "sum over dispatches"


def test_rocprofv3_62_layout_without_timestamps_averages_per_dispatch(tmp_path):
    old = [h for h in ROCPROFV3_70 if h not in ("Dispatch_Id", "Thread_Id", "Accum_VGPR_Count", "Start_Timestamp",
                                                "End_Timestamp")]
    counter_csv(tmp_path / "7_counter_collection.csv", [(1, "k", "MemUnitBusy", 80.0, 0, 100),
                                                        (2, "k", "MemUnitBusy", 40.0, 200, 500)], header=old)
    summary = report(tmp_path)
    assert by_kernel(summary)["k"]["MemUnitBusy"] == pytest.approx(60.0)
    assert summary["counter_aggregation"]["MemUnitBusy"] == "mean over dispatches (no durations known)"


def test_counters_table_is_ordered_by_kernel_gpu_time(tmp_path):
    counter_csv(tmp_path / "7_counter_collection.csv", [(1, "early_light", "SQ_WAVES", 1, 0, 10),
                                                        (2, "late_heavy", "SQ_WAVES", 1, 20, 5000)])
    header = '"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
    (tmp_path / "7_kernel_trace.csv").write_text(header + '"KERNEL_DISPATCH","Agent 1",1,1,"early_light",1,0,10\n'
                                                 '"KERNEL_DISPATCH","Agent 1",1,2,"late_heavy",2,20,5000\n')
    assert [r["kernel"] for r in report(tmp_path)["counters_by_kernel"]] == ["late_heavy", "early_light"]


def test_ncu_rates_are_weighted_by_each_launchs_duration(tmp_path):
    path = tmp_path / "ncu.csv"
    rows = ['"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    for launch, (duration_us, pct, read) in enumerate([(1, 80, "1,000"), (3, 40, "2,000")]):
        rows += [f'"{launch}","9","k","gpu__time_duration.sum","usecond","{duration_us}"',
                 f'"{launch}","9","k","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","{pct}"',
                 f'"{launch}","9","k","lts__t_sector_hit_rate.pct","%","{pct}"',
                 f'"{launch}","9","k","dram__bytes_read.sum","byte","{read}"']
    path.write_text("==PROF== Connected to process 9\n" + "\n".join(rows) + "\n")
    summary = report(path)
    k = by_kernel(summary)["k"]
    assert k["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx((80 * 1 + 40 * 3) / 4)
    assert k["lts__t_sector_hit_rate.pct"] == pytest.approx(50.0)
    assert k["dram__bytes_read.sum"] == 3000.0
    kernel = summary["kernels"][0]  # per-launch durations give the spread too
    assert (kernel["calls"], kernel["total_ns"], kernel["min_ns"], kernel["max_ns"]) == (2, 4000.0, 1000.0, 3000.0)


def test_legacy_rocprof_duration_column_is_not_a_counter(tmp_path):
    (tmp_path / "results.csv").write_text(
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,wave_size,"
        "sig,obj,OccupancyPercent,SQ_WAVES,DispatchNs,BeginNs,EndNs,CompleteNs,DurationNs\n"
        '0,"k",0,0,0,1,1,64,64,0,0,8,0,16,64,0,0,90,16,0,100,200,210,100\n'
        '1,"k",0,0,1,1,1,64,64,0,0,8,0,16,64,0,0,60,16,0,300,600,610,300\n')
    summary = report(tmp_path)
    k = by_kernel(summary)["k"]
    assert "DurationNs" not in k and "DispatchNs" not in k
    assert k["OccupancyPercent"] == pytest.approx((90 * 100 + 60 * 300) / 400) and k["SQ_WAVES"] == 32


def test_rocpd_counters_are_weighted_by_the_dispatch_interval(tmp_path):
    """Counter values hang from their dispatch's event (rocpd_pmc_event.event_id), as rocprofv3's
    writer stores them (tests/rocpd_writer.py)."""
    from rocpd_writer import RocpdWriter
    writer = RocpdWriter(tmp_path / "5_results.db", pid=5)
    for (start, end), busy, waves in (((0, 100), 100.0, 5), ((200, 500), 20.0, 7)):
        event = writer.dispatch("k", start, end, writer.api("hipLaunchKernel", start - 10, start - 5, tid=5), tid=5)
        writer.counter(event, "GPUBusy", busy)
        writer.counter(event, "SQ_WAVES", waves)
    writer.close()
    k = by_kernel(report(tmp_path))["k"]
    assert k["GPUBusy"] == pytest.approx((100 * 100 + 20 * 300) / 400) and k["SQ_WAVES"] == 12


@pytest.mark.parametrize("name, unit, rule", [
    ("SQ_WAVES", "", "sum"), ("TCC_HIT", "", "sum"), ("TA_TA_BUSY", "", "sum"), ("GRBM_GUI_ACTIVE", "", "sum"),
    ("TCC_HIT_sum", "", "sum"), ("TA_BUSY_avr", "", "mean"), ("TA_BUSY_max", "", "max"),
    ("MemUnitBusy", "", "mean"), ("OccupancyPercent", "", "mean"), ("GPU_UTIL", "", "mean"), ("L2CacheHit", "", "mean"),
    ("VALUInsts", "", "mean"), ("Wavefronts", "", "sum"), ("FETCH_SIZE", "", "sum"), ("CU_NUM", "", "mean"),
    ("sm__inst_executed.sum", "inst", "sum"), ("lts__t_sector_hit_rate.pct", "%", "mean"),
    ("dram__bytes.sum.per_second", "byte/second", "mean"), ("sm__warps_active.avg.per_cycle_active", "warp", "mean"),
    ("gpu__time_duration.max", "nsecond", "max"), ("smsp__thread_inst_executed_per_inst_executed.ratio", "", "mean"),
])
def test_every_counter_has_an_aggregation(name, unit, rule):
    assert countersets.aggregation(name, unit) == rule


def test_a_folder_of_stats_files_alone_is_reported(tmp_path, fixtures):
    """rocprofv3 --stats outputs without their traces: kernels and API from the stats files."""
    (tmp_path / "1_kernel_stats.csv").write_text(
        '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n'
        '"gemm",4,4000,1000.0,80.0,500,1500,408.248290\n"relu",2,1000,500.0,20.0,400,600,141.421356\n')
    (tmp_path / "1_hip_api_stats.csv").write_text((fixtures / "rocprofv3-docs/hip_api_stats.csv").read_text())
    (tmp_path / "1_domain_stats.csv").write_text((fixtures / "rocprofv3-docs/hip_domain_stats.csv").read_text())
    summary = report(tmp_path)
    gemm = summary["kernels"][0]
    assert (gemm["name"], gemm["calls"], gemm["total_ns"], gemm["min_ns"], gemm["max_ns"]) == ("gemm", 4, 4000, 500, 1500)
    # StdDev is the sample deviation (n-1); rows show the population one like every other reader
    assert gemm["std_ns"] == pytest.approx(408.248290 * (3 / 4) ** 0.5)
    assert summary["api"][0]["name"] == "hipStreamCreateWithFlags" and summary["api"][0]["calls"] == 4
    assert any("domain_stats" in note for note in summary["notes"])


def test_stats_beside_their_trace_are_left_to_the_trace(tmp_path, fixtures):
    (tmp_path / "1_kernel_trace.csv").write_text((fixtures / "rocprofv3-docs/kernel_trace.csv").read_text())
    (tmp_path / "1_kernel_stats.csv").write_text(
        '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n"ghost",1,1,1,100,1,1,0\n')
    names = {k["name"] for k in report(tmp_path)["kernels"]}
    assert "ghost" not in names and len(names) == 4


def test_a_trace_with_zero_dispatches_says_so(tmp_path):
    (tmp_path / "1_kernel_trace.csv").write_text(
        '"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n')
    (tmp_path / "1_hip_api_trace.csv").write_text(
        '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        '"HIP_RUNTIME_API","hipMalloc",1,1,1,10,20\n')
    summary = report(tmp_path)
    assert summary["totals"]["dispatches"] == 0
    assert any("zero kernel dispatches" in note for note in summary["notes"])


def test_counter_run_kernel_times_are_labelled_and_compare_warns(tmp_path):
    ncu_dir, trace_dir = tmp_path / "ncu", tmp_path / "trace"
    ncu_dir.mkdir()
    trace_dir.mkdir()
    (ncu_dir / "ncu.csv").write_text('"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                                     '"0","9","k","gpu__time_duration.sum","usecond","4"\n')
    (trace_dir / "trace.json").write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 3, "pid": 1, "tid": 1}]}))
    assert "clocks" in report(ncu_dir)["kernel_timing"]
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "compare", str(trace_dir), str(ncu_dir),
                           "--format", "json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "measured differently" in json.loads(done.stdout)["warning"]
