"""XLA/TSL profiler traces: `<host>.trace.json.gz` that jax.profiler (and TensorFlow's profiler, the
same TSL writer) leaves under `<logdir>/plugins/profile/<run>/`, as TensorBoard's profile plugin
(xprof) reads them.

The writer names its processes after the profiler's planes: `/device:GPU:N` for each GPU (its
threads: one per CUDA/HIP stream, `Stream #N(...)`, and derived lines computed from them:
`XLA Ops`, `XLA Modules`, `TensorFlow Ops`, `Steps`, name scopes ...), `/host:CPU` for the host's
threads (TraceMe events), `/host:CUPTI` for CUDA driver/runtime calls where the GPU tracer records
them. What can be told apart is read:

- kernels and copies: the events on a device's `Stream #` threads (a copy or memset by its name,
  `MemcpyH2D` ..., or by its stream's kind, `Stream #14(MemcpyH2D)`); the timeline takes them too,
  one stream per (device, stream);
- operators: the derived `XLA Ops` (HLO ops), `XLA Modules` (jit-compiled functions) and
  `TensorFlow Ops` lines: device time per op, as xprof's op profile counts it (no self time: these
  lines do not nest);
- CUDA API calls: the `/host:CUPTI` process (cuLaunchKernel ...), linked to their kernels by the
  `correlation_id` both carry;
- steps: the derived `Steps` line (a step's device-side span), as step marks of the timeline.

Not read: the host's TraceMe events (a user's jax.profiler.TraceAnnotation is written like every
internal TraceMe, with nothing to tell it apart) and the name-scope lines (the same kernels again,
grouped by scope). Timestamps are microseconds with a fraction (to the ns or below): converted to
integer ns from their decimal text, never through a float.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl.errors import FormatError
from profilectl.formats import json_head, ranks
from profilectl.formats.reader import Reader
from profilectl.formats.tables import PER_DISPATCH, AnnotationRow, KernelStats, StatsByName, Tables, merge_all

if TYPE_CHECKING:
    from profilectl.analysis.timeline import RankTimeline

DEVICE_PREFIX = "/device:"
API_PROCESS = "/host:CUPTI"
HOST_PROCESS = "/host:CPU"
STREAM_PREFIX = "Stream #"
OPERATOR_LINES = ("XLA Ops", "XLA Modules", "TensorFlow Ops")
STEP_LINE = "Steps"
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


def read(path: Path) -> Tables:
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
    kernels: dict[str, list[int]] = {}
    copies: dict[str, list[int]] = {}
    api: dict[str, list[int]] = {}
    operators: dict[str, list[int]] = {}
    gpu_start: list[int] = []
    gpu_end: list[int] = []
    gpu_stream: list[int] = []
    gpu_kind: list[int] = []
    gpu_name: list[int] = []
    gpu_correlation: list[int] = []
    names: dict[str, int] = {}
    streams: dict[str, int] = {}
    api_start: list[int] = []
    api_end: list[int] = []
    api_correlation: list[int] = []
    steps: list[tuple[str, int, int]] = []
    host_operators: dict[str, list[int]] = {}
    host_steps: list[tuple[str, str, Any, int, int]] = []
    host_events: list[tuple[Any, int, int]] = []
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
            if thread.startswith(STREAM_PREFIX):
                is_copy = bool(COPY_NAME.match(name) or COPY_STREAM.search(thread))
                (copies if is_copy else kernels).setdefault(name, []).append(duration)
                gpu_start.append(start)
                gpu_end.append(start + duration)
                gpu_stream.append(streams.setdefault(f"{process[len(DEVICE_PREFIX):]} {thread}", len(streams)))
                gpu_kind.append(1 if is_copy else 0)
                gpu_name.append(names.setdefault(name, len(names)))
                gpu_correlation.append(_correlation(args))
            elif thread in OPERATOR_LINES:
                operators.setdefault(name, []).append(duration)
            elif thread == STEP_LINE:
                step = TRAILING_NUMBER.search(str(args.get("step_num", "")) or name)
                if step and duration > 0:
                    steps.append((f"step#{step.group(1)}", start, start + duration))
        elif process == HOST_PROCESS:
            if "hlo_op" in args:  # XLA:CPU's thunk executor runs the op on this thread
                host_operators.setdefault(name, []).append(duration)
            if "step_num" in args:  # jax.profiler.StepTraceAnnotation
                host_steps.append((name, str(args["step_num"]), event.get("tid"), start, start + duration))
            host_events.append((event.get("tid"), start, start + duration))
        elif process == API_PROCESS:
            api.setdefault(name, []).append(duration)
            api_start.append(start)
            api_end.append(start + duration)
            api_correlation.append(_correlation(args))
    host = host_of(path)
    rank = host
    kernel_stats = _stats(kernels)
    # the device's op lines where the trace has them; else XLA:CPU's ops, timed on the host
    on_device = bool(operators)
    operator_stats = _stats(operators or host_operators)
    annotations = _step_annotations(rank, host_steps, host_events)
    # the device's Steps line where it has one; else the host's step annotations
    steps_on_gpu = bool(steps)
    steps = steps or [(f"{name}#{number}", a, b) for name, number, _, a, b in host_steps]
    timelines: tuple[RankTimeline, ...] = ()
    if gpu_start:
        from profilectl.analysis.timeline import Marker, rank_timeline
        linked = any(c >= 0 for c in api_correlation)
        timelines = (rank_timeline(rank, host, start=gpu_start, end=gpu_end, stream=gpu_stream, kind=gpu_kind,
                                   name=gpu_name, correlation=gpu_correlation if linked else None, names=list(names),
                                   streams=list(streams), api_start=api_start if linked else (),
                                   api_end=api_end if linked else (), api_correlation=api_correlation if linked else (),
                                   markers=[Marker(n, a, b, steps_on_gpu) for n, a, b in steps]),)
    notes: tuple[str, ...] = (
        (f"operators of {path.name}: device time of each XLA/TensorFlow op and module (the profiler's derived "
         "lines), not CPU time; no self time",) if on_device else
        (f"operators of {path.name}: XLA:CPU's HLO ops, timed on the host threads that ran them",) if operator_stats
        else ())
    notes += () if gpu_start else (f"no GPU timeline for {path.name}: its device planes hold no stream activity "
                                  "(a CPU/TPU-only profile, or the GPU tracer was off)",)
    return Tables(kernels=kernel_stats, kernel_detail=PER_DISPATCH if kernel_stats else 0,
                  memory_copies=_stats(copies), api=_stats(api), operators=operator_stats, annotations=annotations,
                  ranks=(ranks.rank_row(rank, host, kernel_stats, operator_stats),),
                  trace_files=(str(path),), timelines=timelines, notes=notes)


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
