"""Profiler backends, by name. The order of SERVICE_ORDER is the fallback order of each service."""

from __future__ import annotations

from profilectl.backends.base import Backend, Job, Step, StepResult
from profilectl.backends.ncu import NsightCompute
from profilectl.backends.nsys import NsightSystems
from profilectl.backends.rocprof_compute import RocprofCompute
from profilectl.backends.rocprof_legacy import LegacyRocprof
from profilectl.backends.rocprof_sys import RocprofSys
from profilectl.backends.rocprofv3 import Rocprofv3
from profilectl.backends.timing import Timing
from profilectl.backends.torch_profiler import TorchProfiler
from profilectl.formats.jax_trace import XlaTraceReader
from profilectl.formats.nccl_inspector import NcclInspectorReader
from profilectl.formats.reader import Reader

BACKENDS: dict[str, Backend] = {b.name: b for b in
                                (Rocprofv3(), RocprofCompute(), RocprofSys(), LegacyRocprof(), NsightCompute(), TorchProfiler(), NsightSystems(),
                                 Timing())}

# Best first. The plan takes the first available backend and records why each earlier one was not.
SERVICE_ORDER: dict[str, tuple[str, ...]] = {
    # rocprof-compute after rocprofv3: it runs the application once per panel's counter pass, whatever the
    # set asks for; ahead of legacy rocprof, for its speed-of-light and measured roofline
    "counters": ("rocprofv3", "rocprof-compute", "rocprof", "ncu"),
    # nsys after torch: a PyTorch process gets torch.profiler's operators; any other CUDA program nsys
    # rocprof-sys after rocprofv3 (which traces the GPU and HIP API at less cost), ahead of legacy
    # rocprof: it samples the host's call stacks beside them (rocpd output: 1.2.0 and later)
    "trace": ("rocprofv3", "rocprof-sys", "rocprof", "torch", "nsys", "timing"),
    "profile": ("timing",),
}

# Every registered reader, for `report` on a bare folder. A file goes to the first reader that
# recognises it, so the readers that match by exact file name come before the generic Chrome-trace
# reader (timing_trace.json is a Chrome trace too).
# Readers of files that tools profilectl does not run write (jax.profiler's and TensorFlow's XLA traces)
FOREIGN_READERS: tuple[Reader, ...] = (XlaTraceReader(), NcclInspectorReader())
READERS: tuple[Reader, ...] = tuple(sorted((*(r for b in BACKENDS.values() for r in b.readers), *FOREIGN_READERS),
                                           key=lambda r: r.kind == "chrome-trace"))

__all__ = ["BACKENDS", "READERS", "SERVICE_ORDER", "Backend", "Job", "Step", "StepResult"]
