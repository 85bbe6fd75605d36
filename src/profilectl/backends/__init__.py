"""Profiler backends, by name. The order of SERVICE_ORDER is the fallback order of each service."""

from __future__ import annotations

from profilectl.backends.base import Backend, Collected, Step, StepResult
from profilectl.backends.ncu import NsightCompute
from profilectl.backends.rocprof_legacy import LegacyRocprof
from profilectl.backends.rocprofv3 import Rocprofv3
from profilectl.backends.timing import Timing
from profilectl.backends.torch_profiler import TorchProfiler

BACKENDS: dict[str, Backend] = {b.name: b for b in
                                (Rocprofv3(), LegacyRocprof(), NsightCompute(), TorchProfiler(), Timing())}

# Best first. The plan takes the first available backend and records why each earlier one was not.
SERVICE_ORDER: dict[str, tuple[str, ...]] = {
    "counters": ("rocprofv3", "rocprof", "ncu"),
    "trace": ("rocprofv3", "rocprof", "torch", "timing"),
    "profile": ("timing",),
}

__all__ = ["BACKENDS", "SERVICE_ORDER", "Backend", "Collected", "Step", "StepResult"]
