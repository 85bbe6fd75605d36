"""XLA/TSL profiler traces: `<host>.trace.json.gz` that jax.profiler (and TensorFlow's profiler, the
same TSL writer) leaves under `<logdir>/plugins/profile/<run>/`, and the trace JSON that xprof
(TensorBoard's profile plugin) makes of a `<host>.xplane.pb`.

The writer names its processes after the profiler's planes: `/device:GPU:N` for each GPU (its
threads: one per CUDA/HIP stream, `Stream #N(...)`, and derived lines computed from them:
`XLA Ops`, `XLA Modules`, `TensorFlow Ops` (`Framework Ops` in current xprof), `Steps`, name
scopes ...; current xprof names a derived line after the stream it comes from: `XLA Ops - from #16`),
`/host:CPU` for the host's threads (TraceMe events, the Python tracer's `$file:line function`
events, and the runtime's launch calls `hipModuleLaunchKernel`/`cuLaunchKernel` with the
`correlation_id` of what they launched), `/host:CUPTI` for CUDA driver/runtime calls where the GPU
tracer records them. What can be told apart is read:

- one rank per device: eight GPUs driven by one process are eight ranks, each with its own
  timeline (its streams, its steps, the launch calls of its kernels), so each GPU's busy time is its
  own, not the union of the eight;
- kernels and copies: the events on a device's `Stream #` threads (a copy or memset by its name,
  `MemcpyH2D` ..., or by its stream's kind, `Stream #14(MemcpyH2D)`);
- operators: the derived `XLA Ops` (HLO ops), `XLA Modules` (jit-compiled functions) and
  `TensorFlow Ops`/`Framework Ops` lines: device time per op, as xprof's op profile counts it (no
  self time: these lines do not nest). A trace with no device plane (XLA:CPU) has its HLO ops on
  the host threads that ran them (args `hlo_op`);
- runtime API calls: the `/host:CUPTI` process, and the `/host:CPU` events with a `correlation_id`
  (the launch calls), linked to their kernels by that id; in the API table where the event names
  the call (`cuStreamSynchronize`, `hipModuleLaunchKernel`), not where it names the kernel it
  launched (TensorFlow's GPU tracer of 2021);
- host activity (for the idle-time diagnosis): every `/host:CPU` event, as a runtime call, a
  Python function (`$...`), a step range, or host work (the rest);
- steps: the derived `Steps` line (a step's device-side span), else jax.profiler's
  StepTraceAnnotation ranges on the host (a TraceMe with `step_num`), also in the annotations table.

Not read: a user's jax.profiler.TraceAnnotation apart from JAX's own TraceMe events (it is written
like every internal TraceMe, with nothing to tell it apart) and the name-scope lines (the same
kernels again, grouped by scope). Timestamps are microseconds with a fraction (to the ns or
below): converted to integer ns from their decimal text, never through a float.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from decimal import Decimal, InvalidOperation
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from profilectl.errors import FormatError
from profilectl.formats import json_head, ranks
from profilectl.formats.reader import Reader
from profilectl.formats.torch_host import RUNTIME_PREFIXES
from profilectl.formats.tables import PER_DISPATCH, AnnotationRow, KernelStats, StatsByName, Tables, merge_all

if TYPE_CHECKING:
    from profilectl.model.timeline import HostActivity, RankTimeline

DEVICE_PREFIX = "/device:"
API_PROCESS = "/host:CUPTI"
HOST_PROCESS = "/host:CPU"
STREAM_PREFIX = "Stream #"
OPERATOR_LINES = ("XLA Ops", "XLA Modules", "TensorFlow Ops", "Framework Ops")
STEP_LINE = "Steps"
# Current xprof names a derived line after its source stream: "XLA Ops - from #16" (xprof's
# derived_timeline.cc GetDerivedLineName); the line is the same, whatever the stream.
DERIVED_SUFFIX = re.compile(r" - from #\d+$")
PYTHON_PREFIX = "$"  # the Python tracer's events: "$file.py:123 function"
COPY_NAME = re.compile(r"^(Memcpy|Memset|memcpy|memset)")
COPY_STREAM = re.compile(r"\((Memcpy|Memset)", re.IGNORECASE)
TRAILING_NUMBER = re.compile(r"(\d+)\s*$")
SUFFIXES = (".trace.json.gz", ".trace.json")
# jax.profiler.trace(create_perfetto_trace=True) writes the same events again beside <host>.trace.json.gz
PERFETTO_COPY = "perfetto_trace.json.gz"


def _ns(value: Any) -> int:
    """Microseconds (an int, or a number's decimal text) as integer ns, exactly."""
    if isinstance(value, int):
        return value * 1000
    try:
        return int((Decimal(value) * 1000).to_integral_value())
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"not a time: {value!r}") from None


def _load(path: Path) -> Any:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            return json.loads(fh.read(), parse_float=str)  # floats kept as text: exact ns
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON (truncated?): {exc}") from None


def is_xla_trace(path: Path) -> bool:
    """A Chrome-trace JSON object whose first events name the profiler's planes (`/device:...`,
    `/host:...`); a torch.profiler trace names none (kineto's processes are pids). By content, not
    by name: the keys before the events are walked (formats/json_head.py)."""
    head = json_head.head_of(path)
    first = head.first
    return head.array_key == "traceEvents" and b'"process_name"' in first \
        and (b'"/device:' in first or b'"/host:' in first)


def host_of(path: Path) -> str:
    name = path.name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return path.stem


@dataclass
class _Device:
    """One device plane's events as read: its kernels, copies and op lines, its GPU activity in
    columns, its steps, and the correlation ids of what ran on it."""
    kernels: dict[str, list[int]] = field(default_factory=dict)
    copies: dict[str, list[int]] = field(default_factory=dict)
    operators: dict[str, list[int]] = field(default_factory=dict)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    stream: list[int] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    name: list[int] = field(default_factory=list)
    correlation: list[int] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)
    steps: list[tuple[str, int, int]] = field(default_factory=list)


def line_of(thread: str) -> str:
    """A derived line's name without the stream it comes from ("XLA Ops - from #16" -> "XLA Ops")."""
    return DERIVED_SUFFIX.sub("", thread)


def read(path: Path) -> Tables:
    from profilectl.model.timeline import HOST_ANNOTATION, HOST_OPERATOR, HOST_PYTHON, HOST_RUNTIME
    data = _load(path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise FormatError(f"{path}: not an XLA trace: no traceEvents list")
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "M":
            name = (event.get("args") or {}).get("name")
            if event.get("name") == "process_name" and isinstance(name, str):
                processes[event.get("pid")] = name
            elif event.get("name") == "thread_name" and isinstance(name, str):
                threads[(event.get("pid"), event.get("tid"))] = name
    devices: dict[str, _Device] = {}
    api: dict[str, list[int]] = {}
    api_start: list[int] = []
    api_end: list[int] = []
    api_correlation: list[int] = []
    host_operators: dict[str, list[int]] = {}
    host_steps: list[tuple[str, str, Any, int, int]] = []
    host_events: list[tuple[Any, int, int, str, int]] = []  # thread, start, end, name, category
    for number, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X" or "dur" not in event:
            continue
        process = processes.get(event.get("pid"), "")
        thread = threads.get((event.get("pid"), event.get("tid")), "")
        name = str(event.get("name", ""))
        try:
            start, duration = _ns(event.get("ts")), _ns(event.get("dur"))
        except ValueError as exc:
            raise FormatError(f"{path}: event {number}: {exc}") from None
        args = event.get("args") or {}
        if process.startswith(DEVICE_PREFIX):
            device = devices.setdefault(process, _Device())
            line = line_of(thread)
            if thread.startswith(STREAM_PREFIX):
                is_copy = bool(COPY_NAME.match(name) or COPY_STREAM.search(thread))
                (device.copies if is_copy else device.kernels).setdefault(name, []).append(duration)
                device.start.append(start)
                device.end.append(start + duration)
                device.stream.append(device.streams.setdefault(f"{process[len(DEVICE_PREFIX):]} {thread}",
                                                               len(device.streams)))
                device.kind.append(1 if is_copy else 0)
                device.name.append(device.names.setdefault(name, len(device.names)))
                device.correlation.append(_correlation(args))
            elif line in OPERATOR_LINES:
                device.operators.setdefault(name, []).append(duration)
            elif line == STEP_LINE:
                step = TRAILING_NUMBER.search(str(args.get("step_num", "")) or name)
                if step and duration > 0:
                    device.steps.append((f"step#{step.group(1)}", start, start + duration))
        elif process == HOST_PROCESS:
            linked = _correlation(args)
            if linked >= 0:  # a launch call (hipModuleLaunchKernel ...): it carries its kernel's hlo_op too
                if name.startswith(RUNTIME_PREFIXES):  # TensorFlow's tracer of 2021 names the call after its kernel
                    api.setdefault(name, []).append(duration)
                api_start.append(start)
                api_end.append(start + duration)
                api_correlation.append(linked)
                category = HOST_RUNTIME
            elif "step_num" in args:  # jax.profiler.StepTraceAnnotation
                host_steps.append((name, str(args["step_num"]), event.get("tid"), start, start + duration))
                category = HOST_ANNOTATION
            else:
                if "hlo_op" in args:  # XLA:CPU's thunk executor runs the op on this thread
                    host_operators.setdefault(name, []).append(duration)
                category = HOST_PYTHON if name.startswith(PYTHON_PREFIX) else HOST_OPERATOR
            host_events.append((event.get("tid"), start, start + duration, name, category))
        elif process == API_PROCESS:
            api.setdefault(name, []).append(duration)
            api_start.append(start)
            api_end.append(start + duration)
            api_correlation.append(_correlation(args))
    host = host_of(path)
    active = {process: device for process, device in devices.items() if device.start}
    on_device = any(device.operators for device in devices.values())
    # the device's op lines where the trace has them; XLA:CPU's ops (on the host) only where no device ran anything
    operators = _joined(device.operators for device in devices.values()) if on_device else \
        host_operators if not active else {}
    operator_stats = _stats(operators)
    kernel_stats = _stats(_joined(device.kernels for device in devices.values()))
    copy_stats = _stats(_joined(device.copies for device in devices.values()))
    annotations = _step_annotations(host, host_steps, [(tid, a, b) for tid, a, b, _, _ in host_events])
    # one rank per device that ran something: its own kernels, timeline, steps
    rank_of = {process: host if len(active) == 1 else f"{host}/{process[len(DEVICE_PREFIX):]}" for process in active}
    activity = _host_activity(host_events, threads, processes)
    timelines: list[RankTimeline] = []
    rank_rows = []
    for process, device in active.items():
        rank = rank_of[process]
        rank_rows.append(ranks.rank_row(rank, host, _stats(device.kernels), _stats(device.operators)))
        timelines.append(_device_timeline(rank, host, device, (api_start, api_end, api_correlation), host_steps,
                                          activity))
    if not active:
        rank_rows.append(ranks.rank_row(host, host, kernel_stats, operator_stats))
    notes: tuple[str, ...] = (
        (f"operators of {path.name}: device time of each XLA/framework op and module (the profiler's derived "
         "lines), not CPU time; no self time",) if on_device else
        (f"operators of {path.name}: XLA:CPU's HLO ops, timed on the host threads that ran them",) if operator_stats
        else ())
    notes += () if active else (f"no GPU timeline for {path.name}: its device planes hold no stream activity "
                                "(a CPU/TPU-only profile, or the GPU tracer was off)",)
    if len(active) > 1:
        notes += (f"{path.name}: one process drove {len(active)} devices; each device is a rank of its own "
                  f"({', '.join(rank_of.values())}), with its own timeline",)
    return Tables(kernels=kernel_stats, kernel_detail=PER_DISPATCH if kernel_stats else 0,
                  memory_copies=copy_stats, api=_stats(api), operators=operator_stats, annotations=annotations,
                  ranks=tuple(rank_rows), trace_files=(str(path),), timelines=tuple(timelines), notes=notes)


def _joined(parts: Iterable[dict[str, list[int]]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for part in parts:
        for name, values in part.items():
            out.setdefault(name, []).extend(values)
    return out


def _device_timeline(rank: str, host: str, device: _Device, launches: tuple[list[int], list[int], list[int]],
                     host_steps: list[tuple[str, str, Any, int, int]], activity: "HostActivity | None"
                     ) -> "RankTimeline":
    """One device's timeline: its GPU activity, the launch calls of its own kernels (by correlation
    id), its Steps line (else the host's step annotations), the process's host activity."""
    from profilectl.model.timeline import Marker, rank_timeline
    mine = set(device.correlation)
    starts, ends, correlations = launches
    picked = [i for i, c in enumerate(correlations) if c >= 0 and c in mine]
    linked = bool(picked)
    steps_on_gpu = bool(device.steps)
    steps = device.steps or [(f"{name}#{number}", a, b) for name, number, _, a, b in host_steps]
    return rank_timeline(rank, host, start=device.start, end=device.end, stream=device.stream, kind=device.kind,
                         name=device.name, correlation=device.correlation if linked else None,
                         names=list(device.names), streams=list(device.streams),
                         api_start=[starts[i] for i in picked], api_end=[ends[i] for i in picked],
                         api_correlation=[correlations[i] for i in picked],
                         markers=[Marker(n, a, b, steps_on_gpu) for n, a, b in steps], host_activity=activity,
                         program="xla")


def _host_activity(events: list[tuple[Any, int, int, str, int]], threads: dict[tuple[Any, Any], str],
                   processes: dict[Any, str]) -> "HostActivity | None":
    """The host's events as the idle-time diagnosis reads them (analysis/timeline.py HostActivity)."""
    if not events:
        return None
    import numpy as np

    from profilectl.model.timeline import HostActivity
    names: dict[str, int] = {}
    tids: dict[Any, int] = {}
    host_pid = next((pid for pid, name in processes.items() if name == HOST_PROCESS), None)
    return HostActivity(
        start=np.array([e[1] for e in events], dtype=np.int64), end=np.array([e[2] for e in events], dtype=np.int64),
        category=np.array([e[4] for e in events], dtype=np.int8),
        name=np.array([names.setdefault(e[3], len(names)) for e in events], dtype=np.int64),
        thread=np.array([tids.setdefault(e[0], len(tids)) for e in events], dtype=np.int64),
        names=tuple(names), threads=tuple(threads.get((host_pid, tid), str(tid)) for tid in tids))


def _step_annotations(rank: str, steps: list[tuple[str, str, Any, int, int]], host_events: list[tuple[Any, int, int]]
                      ) -> tuple[AnnotationRow, ...]:
    """jax.profiler.StepTraceAnnotation ranges (a TraceMe with a step_num) as user annotations: calls and
    total per name; self: the time no other recorded event of its thread covers."""
    if not steps:
        return ()
    from profilectl.formats.roctx import Range, self_times
    ranges = [Range("", hash(tid), a, b) for tid, a, b in host_events]
    own = self_times(ranges)
    by_interval = {(r.thread, r.start, r.end): own[i] for i, r in enumerate(ranges)}
    rows: dict[str, list[int]] = {}
    for name, _number, tid, a, b in steps:
        row = rows.setdefault(name, [0, 0, 0, b - a, b - a])
        row[0] += 1
        row[1] += b - a
        row[2] += by_interval.get((hash(tid), a, b), b - a)
        row[3], row[4] = min(row[3], b - a), max(row[4], b - a)
    return tuple(AnnotationRow(rank=rank, name=name, calls=n, total_ns=total, self_ns=own_ns, gpu_ns=None,
                               min_ns=low, max_ns=high) for name, (n, total, own_ns, low, high) in rows.items())


def _correlation(args: dict[str, Any]) -> int:
    value = args.get("correlation_id")
    try:
        return int(value) if value is not None else -1
    except (TypeError, ValueError):
        return -1


def _stats(durations: dict[str, list[int]]) -> StatsByName:
    return {name: KernelStats.from_integer_sums(len(values), sum(values), sum(v * v for v in values),
                                                min(values), max(values))
            for name, values in durations.items()}


class XlaTraceReader(Reader):
    kind = "xla-trace"

    def recognises(self, path: Path) -> bool:
        return is_xla_trace(path)

    def read_file(self, path: Path) -> Tables:
        return read(path)

    def read(self, files: list[Path]) -> Tables:
        """Each trace once: a perfetto_trace.json.gz beside a <host>.trace.json.gz is its copy."""
        originals = {f.parent for f in files if f.name != PERFETTO_COPY}
        return merge_all(read(f) for f in files if f.name != PERFETTO_COPY or f.parent not in originals)
