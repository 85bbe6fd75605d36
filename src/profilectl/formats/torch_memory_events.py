"""profile_memory's events in a torch trace's text (torch's profiler_kineto.cpp reportMemoryUsage and
reportOutOfMemory): `[memory]` at each allocation and free (args "Bytes", negative for a free, "Total
Allocated", "Total Reserved", "Device Type", "Device Id") and `[OutOfMemory]` at a failed
allocation. Each is a flat object whose only nested object is its args, so it is found in a chunk's
text as the trace streams (formats/chrome_stream.py) by one expression, then decoded alone. Kept
apart from formats/torch_memory.py so that the trace reader imports nothing else for them."""

from __future__ import annotations

import json
import re

MEMORY_NAMES = frozenset({"[memory]", "[OutOfMemory]"})  # instant events (Kineto's cpu_instant_event)
MEMORY_TEXT = re.compile(rb'"\[(memory|OutOfMemory)\]"')  # a chunk without it has none (memoryview: no `in`)
MEMORY_EVENT = re.compile(rb'\{[^{}]*"name"\s*:\s*"\[(?:memory|OutOfMemory)\]"[^{}]*\{[^{}]*\}[^{}]*\}')
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA (ROCm builds report their GPUs as CUDA too)
# (time ns, device, bytes, total allocated, total reserved, out of memory)
MemoryEvent = tuple[int, int, int, int, int, bool]


def memory_events_of(text: bytes | bytearray | memoryview) -> list[MemoryEvent]:
    """The GPU's [memory] and [OutOfMemory] events of a piece of a trace's text, in order."""
    import json
    found = []
    for match in MEMORY_EVENT.finditer(text):
        try:
            event = json.loads(match.group(0))
        except (ValueError, RecursionError):
            continue
        args = event.get("args") if isinstance(event, dict) else None
        ts = event.get("ts") if isinstance(event, dict) else None
        if not isinstance(args, dict) or not isinstance(ts, (int, float)) or isinstance(ts, bool) \
                or args.get("Device Type") != CUDA_DEVICE_TYPE:
            continue
        numbers = [args.get(k) for k in ("Device Id", "Bytes", "Total Allocated", "Total Reserved")]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            continue
        device, size, allocated, reserved = (int(n) for n in numbers)  # type: ignore[arg-type]
        found.append((round(ts * 1000), device, size, allocated, reserved, event.get("name") == "[OutOfMemory]"))
    return found
