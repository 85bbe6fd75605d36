"""torch.profiler Chrome-trace JSON (export_chrome_trace): kernels, copies and operators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilectl.errors import FormatError
from profilectl.files import read_json
from profilectl.formats.reader import Reader, first_bytes
from profilectl.formats.tables import PER_DISPATCH, KernelStats, StatsByName, Tables

COPY_CATEGORIES = {"gpu_memcpy", "gpu_memset"}


def load(path: Path) -> list[Any]:
    doc = read_json(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise FormatError(f"{path}: not a Chrome trace: no traceEvents list")
    return events


def read(path: Path) -> Tables:
    """Chrome traces carry microseconds; tables are in nanoseconds like every other reader."""
    kernels: StatsByName = {}
    copies: StatsByName = {}
    ops: StatsByName = {}
    for event in load(path):
        if not isinstance(event, dict) or event.get("ph") != "X" or "dur" not in event:
            continue
        category = event.get("cat")
        target = kernels if category == "kernel" else copies if category in COPY_CATEGORIES else \
            ops if category == "cpu_op" else None
        if target is None:
            continue
        try:
            duration_ns = float(event["dur"]) * 1000.0
        except (TypeError, ValueError):
            raise FormatError(f"{path}: event {event.get('name', '?')!r} has a non-numeric dur "
                              f"{event['dur']!r}") from None
        target.setdefault(str(event.get("name", "?")), KernelStats()).add(duration_ns)
    return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0, memory_copies=copies,
                  operators=ops, trace_files=(str(path),))


def is_chrome_trace(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    head = first_bytes(path)
    return b'"traceEvents"' in head or head.lstrip().startswith(b"[")


class ChromeTraceReader(Reader):
    kind = "chrome-trace"

    def recognises(self, path: Path) -> bool:
        return is_chrome_trace(path)

    def read_file(self, path: Path) -> Tables:
        return read(path)
