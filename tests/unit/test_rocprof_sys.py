"""rocprof-sys (rocprofiler-systems) as a trace backend: its command line (the double accepts exactly
what rocprof-sys-run's parser takes), its rocpd database with the sampled call stacks read into the
timeline as host activity, so an idle gap is named by the host function that held it."""

import json

import pytest

from cli_support import WORKLOAD, cli, json_run
from rocpd_writer import RocpdWriter


@pytest.fixture
def mi300(machine):
    """An MI300X with ROCm 7.1 (rocprof-sys 1.2.0) and rocprof-sys-run, no rocprofv3."""
    machine.kfd_gpu(1, 90402)
    machine.rocm("7.1.0")
    machine.double("rocprof-sys-run")
    return machine


def test_trace_names_the_host_function_that_held_the_gap(mi300):
    result, run = json_run(mi300, "trace", "--", *WORKLOAD,
                           extra_env={"FAKE_ROCPROF_SYS_HOST_FUNCTION": "tokenize_batch(std::vector<int>&)"})
    assert result["status"] == "ok", result["message"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"] == "rocprof-sys"
    argv = manifest["argv"]
    assert argv[1:3] == ["--output", str(run / "raw/rocprof-sys")] and argv[argv.index("--") + 1:] == WORKLOAD
    assert manifest["phases"][0]["environment"]["ROCPROFSYS_USE_ROCPD"] == "true"
    assert manifest["perfetto_trace"].endswith(".proto")
    summary = json.loads((run / "summary.json").read_text())
    assert [k["name"] for k in summary["kernels"]] == ["forward_kernel", "backward_kernel"]
    assert [a["name"] for a in summary["api"]] == ["hipLaunchKernel"]  # sampled frames are no API calls
    (cause,) = summary["diagnosis"]["steady"]
    # the innermost frame outside libc: the program's own function, not __memmove_avx_unaligned_erms
    assert cause["cause"] == "host" and cause["activity"] == "tokenize_batch(std::vector<int>&)"
    assert cause["idle_ns"] == 2_000_000  # from the end of forward_kernel to the start of backward_kernel


def test_a_release_without_rocpd_output_is_refused_in_one_line(mi300):
    mi300.rocm("7.0.2")  # rocprof-sys 1.1.0: Perfetto only
    done = cli(mi300, "trace", "--backend", "rocprof-sys", "--", *WORKLOAD)
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert "rocprof-sys 1.1.0 writes its trace as Perfetto protobuf only" in done.stderr


def test_kernel_filters_are_refused_before_running(mi300):
    done = cli(mi300, "trace", "--kernel", "gemm", "--", *WORKLOAD)
    assert done.returncode == 2 and "rocprof-sys cannot honour --kernel" in done.stderr
    assert not (mi300.root.parent / "traces").exists() or not any((mi300.root.parent / "traces").iterdir())


def test_rocprofv3_stays_first(mi300):
    mi300.double("rocprofv3")
    mi300.counters_file = mi300.root.parent / "counters.txt"
    mi300.counters_file.write_text("SQ_WAVES\n")
    done = cli(mi300, "trace", "--dry-run", "--", *WORKLOAD)
    assert "backend rocprofv3" in done.stdout
    forced = cli(mi300, "trace", "--dry-run", "--backend", "rocprof-sys", "--", *WORKLOAD)
    assert forced.returncode == 0 and "rocprof-sys-run --output" in forced.stdout


# ------------------------------------------------------------------ the reader on databases written as AMD's tools do
def test_samples_whose_every_frame_is_a_library_are_named_by_the_innermost(tmp_path):
    from profilectl.analysis.timeline import HOST_OPERATOR, HOST_RUNTIME
    from profilectl.formats.rocpd import rocpd_read, rocpd_regions
    path = tmp_path / "rocpd-7.db"
    with RocpdWriter(path, pid=7) as writer:
        call = writer.api("hipDeviceSynchronize", 1_000, 900_000, tid=7, category="rocm_hip_api")
        writer.dispatch("k", 2_000, 3_000, call, tid=7)
        writer.dispatch("k", 950_000, 960_000, call, tid=7)
        writer.sampled([("samples [rocprof-sys]", "")], 0, 1_000_000, 7)
        for at in (10_000, 110_000):
            writer.sampled([("hipDeviceSynchronize", "/opt/rocm/lib/libamdhip64.so.6"),
                            ("sched_yield", "/usr/lib/x86_64-linux-gnu/libc.so.6")], at, at + 100_000, 7)
    _, timeline = rocpd_read(path, "0", None)
    activity = timeline.host_activity
    names = [activity.names[i] for i in activity.name]
    categories = list(activity.category)
    assert names.count("sched_yield") == 2 and "samples [rocprof-sys]" not in names
    assert categories[names.index("sched_yield")] == HOST_OPERATOR
    assert categories[names.index("hipDeviceSynchronize")] == HOST_RUNTIME
    assert set(rocpd_regions(path)) == {"hipDeviceSynchronize"}


def test_a_rocprofv3_database_gets_no_host_activity(tmp_path):
    from profilectl.formats.rocpd import rocpd_read
    path = tmp_path / "1_results.db"
    with RocpdWriter(path, pid=1) as writer:
        call = writer.api("hipLaunchKernel", 1_000, 2_000, tid=1)
        writer.dispatch("k", 3_000, 4_000, call, tid=1)
    _, timeline = rocpd_read(path, "0", None)
    assert timeline.host_activity is None and timeline.program == ""
