"""torch.profiler Chrome-trace JSON (export_chrome_trace): kernels and operators."""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import FormatError, KernelStats, kernel_rows, read_json

COPY_CATEGORIES = {"gpu_memcpy", "gpu_memset"}


def load(path: Path) -> list[dict]:
    doc = read_json(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise FormatError(f"{path}: not a Chrome trace: no traceEvents list")
    return events


def tables(path: Path) -> dict[str, list[dict]]:
    """Chrome traces carry microseconds; tables are in nanoseconds like every other reader."""
    kernels: dict[str, KernelStats] = {}
    copies: dict[str, KernelStats] = {}
    ops: dict[str, KernelStats] = {}
    for event in load(path):
        if not isinstance(event, dict) or event.get("ph") != "X" or "dur" not in event:
            continue
        category = event.get("cat")
        duration_ns = float(event["dur"]) * 1000.0
        if category == "kernel":
            kernels.setdefault(event.get("name", "?"), KernelStats()).add(duration_ns)
        elif category in COPY_CATEGORIES:
            copies.setdefault(event.get("name", "?"), KernelStats()).add(duration_ns)
        elif category == "cpu_op":
            ops.setdefault(event.get("name", "?"), KernelStats()).add(duration_ns)
    return {"kernels": kernel_rows(kernels), "memory_copies": kernel_rows(copies), "operators": kernel_rows(ops)}
