"""Where the GPU memory went: torch's memory history replayed (formats/torch_memory.py reads it).

Per device: allocated (bytes held by tensors: each `alloc` adds its size, each `free_completed`
takes it back) against reserved (bytes the caching allocator holds from the driver: `segment_alloc`
and `segment_map` add, `segment_free` and `segment_unmap` take back) over the history, both started
from what the snapshot holds at its end less what the history did, since the history can start
after the first allocations (or keep only its last max_entries events). The peak is the largest
allocated in that replay; what held it is every allocation alive then, by category; for a run that
ran out of memory, the allocations alive at the `oom` event and the code that made them.

Categories come from each allocation's Python stack by profiling/memory_categories.yaml (rules in
order, the first whose frame pattern matches names it): optimizer state, gradients, parameters,
activations, other; an allocation alive at the end whose `alloc` is not in the history is
"before the history" unless its block in the snapshot kept its stack.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from profilectl import data
from profilectl.model.memory import LiveAllocation, MemoryFailure, MemoryPoint, MemoryReport, MemoryShare

FILE = "memory_categories.yaml"
SERIES_POINTS = 300  # the chart's points per device (power_chart.MAX_POINTS: drawn as they are), each the largest allocated of its stretch
LARGEST = 15  # allocations listed at a failure
STACK_FRAMES = 4
GROWS = {"alloc": (1, 0), "free_completed": (-1, 0), "segment_alloc": (0, 1), "segment_map": (0, 1),
         "segment_free": (0, -1), "segment_unmap": (0, -1)}
ALIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")


@functools.lru_cache(maxsize=1)
def rules() -> dict[str, Any]:
    doc = data.load_mapping(FILE)
    compiled = [(str(rule["category"]), [re.compile(p) for p in rule.get("frames") or ()], str(rule.get("reason", "")))
                for rule in doc.get("rules") or ()]
    return {"rules": compiled, "no_python_frame": str(doc.get("no_python_frame", "other")),
            "other": str(doc.get("other", "other")), "before_history": str(doc.get("before_history", "unknown")),
            "doc": doc}


def _frame_text(frame: Mapping[str, Any]) -> str:
    return f"{str(frame.get('filename', '')).replace(chr(92), '/')}:{frame.get('name', '')}"


def _frames(value: Any) -> list[Mapping[str, Any]]:
    return [f for f in value if isinstance(f, dict)] if isinstance(value, list) else []


def category_of(frames: Sequence[Mapping[str, Any]]) -> str:
    """The first rule with a matching frame anywhere in the stack; no Python frame at all: the
    data's no_python_frame category; else the data's `other`."""
    found = rules()
    texts = [_frame_text(f) for f in frames]
    for category, patterns, _ in found["rules"]:
        if any(p.search(text) for p in patterns for text in texts):
            return category
    if not any(str(f.get("filename", "")).endswith(".py") for f in frames):
        return found["no_python_frame"]
    return found["other"]


def _own_code(filename: str) -> bool:
    """Not torch's, nor the standard library's or another installed package's: the program's own."""
    path = filename.replace("\\", "/")
    return filename.endswith(".py") and "/site-packages/" not in path and "/dist-packages/" not in path \
        and "/torch/" not in path and not re.search(r"/lib/python3\.\d+/", path)


def made_by(frames: Sequence[Mapping[str, Any]]) -> str:
    """The innermost frame of the program's own code (frames come innermost first), else the
    innermost Python frame; "" without one."""
    chosen = next((f for f in frames if _own_code(str(f.get("filename", "")))), None) or \
        next((f for f in frames if str(f.get("filename", "")).endswith(".py")), None)
    if chosen is None:
        return ""
    return f"{str(chosen.get('filename', '')).rsplit('/', 1)[-1]}:{chosen.get('line', '?')} in {chosen.get('name', '?')}"


def stack_text(frames: Sequence[Mapping[str, Any]]) -> str:
    python = [f for f in frames if str(f.get("filename", "")).endswith(".py")] or list(frames)
    return " < ".join(f"{str(f.get('filename', '')).rsplit('/', 1)[-1]}:{f.get('line', '?')} {f.get('name', '?')}"
                      for f in python[:STACK_FRAMES])


@dataclass
class _Alive:
    """A live allocation in the memory replay: its size, the stack that made it, and whether it predates the history."""
    size: int
    frames: list[Mapping[str, Any]]
    before: bool  # alive at the history's start (not allocated within it)


def _shares(alive: Iterable[_Alive]) -> tuple[MemoryShare, ...]:
    before = rules()["before_history"]
    totals: dict[str, list[int]] = {}
    for a in alive:
        category = before if a.before and not a.frames else category_of(a.frames)
        sums = totals.setdefault(category, [0, 0])
        sums[0] += a.size
        sums[1] += 1
    return tuple(MemoryShare(category=c, bytes=b, allocations=n)
                 for c, (b, n) in sorted(totals.items(), key=lambda item: -item[1][0]))


def _device_of(segment: Mapping[str, Any]) -> int:
    device = segment.get("device", 0)
    return device if isinstance(device, int) else 0


def _end_state(segments: Sequence[Mapping[str, Any]], device: int) -> tuple[int, int, dict[int, _Alive]]:
    """What the snapshot holds at its end on `device`: allocated, reserved, and the live blocks."""
    allocated = reserved = 0
    alive: dict[int, _Alive] = {}
    for segment in segments:
        if _device_of(segment) != device:
            continue
        reserved += int(segment.get("total_size", 0))
        for block in segment.get("blocks") or ():
            if block.get("state") in ALIVE_STATES:
                allocated += int(block.get("size", 0))
                address = block.get("address")
                if isinstance(address, int):
                    alive[address] = _Alive(int(block.get("size", 0)), _frames(block.get("frames")), True)
    return allocated, reserved, alive


def _at(entry: Mapping[str, Any], index: int, first_us: float | None) -> float:
    time_us = entry.get("time_us")
    if first_us is not None and isinstance(time_us, (int, float)):
        return (time_us - first_us) / 1e6
    return float(index)


def replay(snapshot: Mapping[str, Any], device: int, trace: Sequence[Mapping[str, Any]], rank: str,
           source: str) -> MemoryReport:
    end_allocated, end_reserved, end_alive = _end_state(snapshot.get("segments") or (), device)
    made = sum(e.get("size", 0) for e in trace if e["action"] == "alloc")
    freed = sum(e.get("size", 0) for e in trace if e["action"] == "free_completed")
    grown = sum(e.get("size", 0) for e in trace if e["action"] in ("segment_alloc", "segment_map"))
    shrunk = sum(e.get("size", 0) for e in trace if e["action"] in ("segment_free", "segment_unmap"))
    start_allocated = max(0, end_allocated - made + freed)
    start_reserved = max(0, end_reserved - grown + shrunk)
    # alive at the start: the end's live blocks that no `alloc` of the history made
    made_here = {e.get("addr") for e in trace if e["action"] == "alloc"}
    alive: dict[int, _Alive] = {a: v for a, v in end_alive.items() if a not in made_here}
    timed: list[float] = [e["time_us"] for e in trace if isinstance(e.get("time_us"), (int, float)) and e["time_us"]]
    first_us = min(timed) if len(timed) == len(trace) and timed else None
    allocated, reserved = start_allocated, start_reserved
    points = [(0.0, allocated, reserved)]
    peak, peak_index, peak_reserved = allocated, -1, reserved
    failure_index = None
    for index, entry in enumerate(trace):
        action = entry["action"]
        da, dr = GROWS.get(action, (0, 0))
        size = int(entry.get("size", 0))
        allocated += da * size
        reserved += dr * size
        if action == "oom" and failure_index is None:
            failure_index = index
        points.append((_at(entry, index, first_us), allocated, reserved))
        if allocated > peak:
            peak, peak_index = allocated, index
        peak_reserved = max(peak_reserved, reserved)
    # the allocations alive at the peak and at the failure: replayed again up to each
    wanted = {i for i in (peak_index, failure_index) if i is not None}
    at: dict[int, list[_Alive]] = {}
    if -1 in wanted:
        at[-1] = list(alive.values())
    for index, entry in enumerate(trace):
        if not wanted or index > max(wanted):
            break
        address = entry.get("addr")
        if entry["action"] == "alloc" and isinstance(address, int):
            alive[address] = _Alive(int(entry.get("size", 0)), _frames(entry.get("frames")), False)
        elif entry["action"] == "free_completed":
            alive.pop(address, None)  # type: ignore[arg-type]
        if index in wanted:
            at[index] = list(alive.values())
    peak_alive = at.get(peak_index, [])
    failure = None
    notes = []
    if failure_index is not None:
        oom = trace[failure_index]
        live = at.get(failure_index, [])
        before = rules()["before_history"]
        largest = sorted(live, key=lambda a: -a.size)[:LARGEST]
        failure = MemoryFailure(
            requested=int(oom.get("size", 0)), device_free=oom.get("device_free") if isinstance(
                oom.get("device_free"), int) else None,
            allocated=points[failure_index + 1][1], reserved=points[failure_index + 1][2], by_category=_shares(live),
            largest=tuple(LiveAllocation(bytes=a.size, category=before if a.before and not a.frames else
                                         category_of(a.frames), made_by=made_by(a.frames), stack=stack_text(a.frames))
                          for a in largest),
            requested_by=made_by(_frames(oom.get("frames"))))
    extra: Mapping[str, Any] = snapshot["profilectl"] if isinstance(snapshot.get("profilectl"), dict) else {}
    torch_max = _per_device(extra.get("max_allocated"), device)
    if torch_max is not None and torch_max != peak:
        notes.append(f"torch.cuda.max_memory_allocated() says {torch_max:,} bytes, the replayed history "
                     f"{peak:,}: the history holds {'no' if not trace else 'not all'} of the run's allocator events "
                     "(it keeps the last max_entries, from when it was started)")
    if not trace:
        notes.append("the snapshot has no history (torch.cuda.memory._record_memory_history was not on): the state "
                     "at the dump only")
    return MemoryReport(
        rank=rank, device=device, source=source, events=len(trace), time_basis="seconds" if first_us is not None
        else "event", peak_allocated=peak, peak_at=points[peak_index + 1][0], reserved_at_peak=points[peak_index + 1][2],
        peak_reserved=peak_reserved, by_category=_shares(peak_alive), series=_downsample(points),
        torch_max_allocated=torch_max, torch_max_reserved=_per_device(extra.get("max_reserved"), device),
        failure=failure, notes=tuple(notes))


def _per_device(value: Any, device: int) -> int | None:
    if isinstance(value, dict):
        found = value.get(str(device), value.get(device))
        return found if isinstance(found, int) else None
    return None


def _downsample(points: Sequence[tuple[float, int, int]]) -> tuple[MemoryPoint, ...]:
    """At most SERIES_POINTS points: per stretch, the point of its largest allocated (a peak is never
    averaged away), in time order."""
    if len(points) <= SERIES_POINTS:
        return tuple(MemoryPoint(at=t, allocated=a, reserved=r) for t, a, r in points)
    out = []
    for k in range(SERIES_POINTS):
        stretch = points[k * len(points) // SERIES_POINTS:(k + 1) * len(points) // SERIES_POINTS]
        t, a, r = max(stretch, key=lambda p: p[1])
        out.append(MemoryPoint(at=t, allocated=a, reserved=r))
    return tuple(out)


def analyse(snapshot: Mapping[str, Any], rank: str, source: str) -> tuple[MemoryReport, ...]:
    """One report per device the snapshot has segments or history on."""
    traces = snapshot.get("device_traces") or []
    devices = sorted({_device_of(s) for s in snapshot.get("segments") or ()} |
                     {i for i, trace in enumerate(traces) if trace})
    return tuple(replay(snapshot, device, traces[device] if device < len(traces) else [], rank, source)
                 for device in devices)


def from_profile_events(events: Sequence[tuple[int, int, int, int, int, bool]], rank: str,
                        source: str) -> tuple[MemoryReport, ...]:
    """A trace recorded with profile_memory=True and no memory history: per device, allocated and
    reserved over time as torch reported them with each allocation and free ("Total Allocated",
    "Total Reserved"), their peaks, and an [OutOfMemory] event's request; no stacks, so no
    categories and no allocations alive at a failure."""
    by_device: dict[int, list[tuple[int, int, int, int, int, bool]]] = {}
    for event in events:
        by_device.setdefault(event[1], []).append(event)
    out = []
    for device, mine in sorted(by_device.items()):
        mine.sort(key=lambda e: e[0])
        first = mine[0][0]
        points = [((at - first) / 1e9, allocated, reserved) for at, _, _, allocated, reserved, _ in mine]
        peak_index = max(range(len(points)), key=lambda i: points[i][1])
        oom = next((e for e in mine if e[5]), None)
        failure = MemoryFailure(requested=oom[2], device_free=None, allocated=oom[3], reserved=oom[4], by_category=(),
                                largest=(), requested_by="") if oom else None
        out.append(MemoryReport(
            rank=rank, device=device, source=f"{source} (profile_memory events)", events=len(mine),
            time_basis="seconds", peak_allocated=points[peak_index][1], peak_at=points[peak_index][0],
            reserved_at_peak=points[peak_index][2], peak_reserved=max(p[2] for p in points), by_category=(),
            series=_downsample(points), failure=failure,
            notes=("profile_memory events only: totals at each allocation and free, no stacks (what held the peak "
                   "needs torch's memory history: profilectl trace --memory)",)))
    return tuple(out)
