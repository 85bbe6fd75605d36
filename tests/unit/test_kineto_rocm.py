"""PyTorch on ROCm: Kineto collects the GPU activity through roctracer (PyTorch's ROCm builds up to
the 7.x line) or through rocprofiler-sdk (libkineto's RocmActivityProfiler, which writes
"rocprofiler-sdk_version" where the roctracer path writes "roctracer_version"). Both log the same
events (GenericActivityProfiler: kernel, gpu_memcpy, cuda_runtime for the HIP API): a trace is read
alike and says which tracer collected it, with the HIP runtime it ran on."""

import gzip

from support import REPO

ROCM70 = REPO / "tests/fixtures/real/tracelens/perf_model/normalization_layer_test.json.gz"  # ROCm 7.0, roctracer


def test_a_roctracer_trace_says_so(tmp_path):
    from profilectl.report.load import load
    summary = load(ROCM70)
    assert summary.metadata.tool == "torch.profiler (Kineto through roctracer 4.1)"
    assert summary.metadata.rocm == "HIP runtime 7.0.51831"  # HIP_VERSION 70051831


def test_a_rocprofiler_sdk_trace_is_read_alike_and_says_so(tmp_path):
    """No real rocprofiler-sdk-era Kineto trace was found in a public repository (TraceLens' and
    HTA's ROCm 7.x traces all carry roctracer_version): the real ROCm 7.0 trace with its version key
    as RocmActivityProfiler::logGpuVersions writes it, unquoted as the roctracer version is (pytorch/kineto libkineto/src/
    RocmActivityProfiler.cpp) stands for one."""
    from profilectl.report.load import load
    text = gzip.open(ROCM70).read()
    assert text.count(b'"roctracer_version"') == 1
    sdk = tmp_path / "rocprofiler_sdk_trace.json.gz"
    sdk.write_bytes(gzip.compress(text.replace(b'"roctracer_version": 4.1', b'"rocprofiler-sdk_version": 1.1')))
    before, after = load(ROCM70), load(sdk)
    assert after.metadata.tool == "torch.profiler (Kineto through rocprofiler-sdk 1.1)"
    assert after.metadata.rocm == "HIP runtime 7.0.51831"
    assert [(k.name, k.calls, k.total_ns) for k in after.kernels] == [(k.name, k.calls, k.total_ns) for k in before.kernels]
    assert [(a.name, a.calls) for a in after.api] == [(a.name, a.calls) for a in before.api]
    assert after.kernels and any(a.name == "hipLaunchKernel" for a in after.api)
