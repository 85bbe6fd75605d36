"""Summary: what a report shows, computed once from Tables and stored as summary.json.

Reporting a finished run reads this file only, so it costs the same whatever the trace size; a
bare output directory's summary is cached outside the user's files (read/cache.py).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from profilectl.analysis.diagnosis import Diagnosis
from profilectl.model.timeline import TimelineAnalysis
from profilectl.errors import FormatError
from profilectl.files import load_typed, read_json, write_json_atomic
from profilectl.model.summary import RankSummary  # noqa: F401 (re-exported)
from profilectl.model.tables import AnnotationRow, CounterValue, RankRow, StatsByName, Tables
from profilectl.model.collectives import InspectorRecord
from profilectl.model.memory import MemoryReport
from profilectl.model.operators import OperatorShape

if TYPE_CHECKING:
    from profilectl.analysis.collective_calls import CollectiveCalls
    from profilectl.analysis.reduce import RankReduction
    from profilectl.analysis.roofline import RooflineResult
    from profilectl.analysis.steps import ProfilerCost
    from profilectl.envreport import Fallback
    from profilectl.jobs import JobManifest
    from profilectl.manifest import Manifest
    from profilectl.telemetry.model import PowerSummary


def _import_field_types() -> None:
    """The field types a summary computed from profiler files may never build (a run's fallbacks, a
    SLURM job, power, counters' roofline, collectives): imported when a stored summary is decoded, so
    that `report` of a CSV does not import the modules behind the first three (the manifest chain,
    the telemetry; issue 38's cold start). msgspec and dacite find a field's type by its name in this
    module's namespace, so they are put there once, before the first decode."""
    if "JobManifest" in globals():
        return
    from profilectl.analysis.collective_calls import CollectiveCalls
    from profilectl.analysis.roofline import RooflineResult
    from profilectl.envreport import Fallback
    from profilectl.jobs import JobManifest
    from profilectl.telemetry.model import PowerSummary
    globals().update(CollectiveCalls=CollectiveCalls, RooflineResult=RooflineResult, Fallback=Fallback,
                     JobManifest=JobManifest, PowerSummary=PowerSummary)

# 2: totals.gpu_time_ns counts copies and memsets (kernel_time_ns and copy_time_ns apart); `imbalance`
# is `kernel_time_spread` (most/least, not slowest/fastest); steps are host-side windows (docs/definitions.md)
# 3: operators ranked by self time, their `percent` the share of the sum of self times
# 4: operator_shapes, collective_calls, memory, inspector
SUMMARY_SCHEMA = 4
AGGREGATION_WORDS = {"sum": "sum over dispatches", "mean": "mean weighted by dispatch duration",
                     "mean per dispatch": "mean over dispatches (no durations known)", "max": "max over dispatches",
                     "min": "min over dispatches", "derived": "derived from the aggregated counters"}


@dataclass(frozen=True)
class KernelRow:
    """One name's statistics (kernels, API calls, copies, operators), times in ns. min/max/std are
    None where the tool reports totals only (ncu's duration metric, rocprof's stats file); self_ns
    (time not spent in nested calls, torch's "Self CPU") is known for torch.profiler operators only."""
    name: str
    calls: int
    total_ns: float
    mean_ns: float
    percent: float
    min_ns: float | None = None
    max_ns: float | None = None
    std_ns: float | None = None
    self_ns: float | None = None




@dataclass(frozen=True)
class KernelTimeSpread:
    """The rank with the most GPU time against the rank with the least (CPU operator time for
    CPU-only jobs). It names no straggler and no slowest rank: a rank that waits in collectives has
    as much GPU time as the one it waits for, or more (NCCL kernels spin while they wait); the
    straggler comes from waiting (analysis/stragglers.py, Summary.diagnosis)."""
    most: str
    most_ns: float
    least: str
    least_ns: float
    percent: float  # (most - least) / least: relative to the least, as `compare` is to its base
    basis: str = "gpu"


@dataclass(frozen=True)
class Hotspot:
    """An instruction of a kernel where PC samples landed (source: the code object's line, when built
    with debug information)."""
    kernel: str
    instruction: str
    source: str
    samples: int
    percent: float


@dataclass(frozen=True)
class StallReason:
    """One PC-sampling stall reason: its samples and their percent of all stall samples."""
    reason: str
    samples: int
    percent: float


@dataclass(frozen=True)
class TimingStats:
    """The timed runs' wall times (timing backend): their count, mean, median, p95, min, max and spread, in seconds."""
    runs: int
    mean_s: float
    median_s: float
    p95_s: float
    min_s: float
    max_s: float
    std_s: float


@dataclass(frozen=True)
class StepTime:
    """The steady-state time of a Python workload's steps (from optimizer.step() or profilectl.step()
    marks in the timed runs), beside the process wall time that also pays for start-up and set-up.
    A step's time is the interval between two step ends; the first `warmup_steps` of every run are
    warm-up (CUDA context, autotuning, allocator growth) and shown apart."""
    runs: int
    steps: int  # steady-state steps measured, all runs together
    warmup_steps: int  # per run
    median_s: float
    mean_s: float
    p95_s: float
    min_s: float
    max_s: float
    std_s: float
    warmup_s: tuple[float, ...]  # the warm-up steps, position by position (median over the runs)
    loop_s: float  # median over the runs of first to last step end
    source: str = "optimizer.step() / profilectl.step() marks"


@dataclass(frozen=True)
class SourceInfo:
    """What a summary was made from: the kind of data (a run, a job, the readers' kinds), its path and files read."""
    kind: str
    path: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Totals:
    """GPU time is device time: kernels, copies and memsets, summed over activities (docs/definitions.md)."""
    kernels: int = 0
    dispatches: int = 0
    gpu_time_ns: float = 0.0  # kernel_time_ns + copy_time_ns
    kernel_time_ns: float = 0.0
    copy_time_ns: float = 0.0  # copies and memsets
    copies: int = 0


@dataclass(frozen=True)
class RunStory:
    """What a report shows of a run's manifest: the service, the choice and the fallback story."""
    service: str
    backend: str
    reason: str
    fallbacks: tuple[Fallback, ...]
    status: str
    message: str | None
    exit_code: int | None
    started_at: str
    wall_seconds: float | None
    workload: tuple[str, ...]
    notes: tuple[str, ...]

    @classmethod
    def of(cls, manifest: Manifest) -> "RunStory":
        return cls(**{f.name: getattr(manifest, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class RunMetadata:
    """Where, when and with what the data was made, shown by every report format. From a run's
    manifest.json and env.json; for files a tool wrote by hand, what they say of themselves (a
    torch.profiler trace: its GPU, CUDA versions and clock). None: not known, never guessed."""
    started_at: str | None = None  # ISO 8601, UTC
    host: str | None = None
    gpu: str | None = None  # model (architecture)
    driver: str | None = None  # the GPU driver: "NVIDIA 580.159.04"; a torch trace: the CUDA driver API
    rocm: str | None = None
    cuda: str | None = None  # the CUDA runtime (PyTorch's build, or the trace's runtime)
    torch: str | None = None
    tool: str | None = None  # the profiler that wrote the data
    tool_version: str | None = None
    profilectl_version: str | None = None
    command: tuple[str, ...] = ()  # the workload, as the manifest keeps it (secret --env values redacted)
    profiler_command: tuple[str, ...] = ()  # the profiler's own command line, where it differs
    backend: str | None = None
    reason: str | None = None  # why that backend
    source: str = ""  # where these facts were read


def metadata_items(summary: "Summary", backend_shown: bool = False) -> list[tuple[str, str]]:
    """The metadata a report shows, as (label, text) pairs, unknown ones left out; the backend and
    why too, unless the report's heading already says it (backend_shown)."""
    meta = summary.metadata
    if meta is None:
        return []
    import shlex
    stamp = meta.started_at or ""
    date = stamp[:19].replace("T", " ") + (" UTC" if stamp.endswith(("Z", "+00:00")) else "") if stamp else None
    tool = " ".join(filter(None, (meta.tool, meta.tool_version))) or None
    backend = None if backend_shown else \
        f"{meta.backend}: {meta.reason}" if meta.backend and meta.reason else meta.backend
    items = [("date", date), ("host", meta.host), ("GPU", meta.gpu), ("driver", meta.driver), ("ROCm", meta.rocm),
             ("CUDA", meta.cuda), ("PyTorch", meta.torch), ("tool", tool),
             ("profilectl", meta.profilectl_version), ("backend", backend),
             ("command", shlex.join(meta.command) if meta.command else None),
             ("profiler command", shlex.join(meta.profiler_command) if meta.profiler_command else None),
             ("metadata from", meta.source or None)]
    return [(label, text) for label, text in items if text]


# Fallbacks that say nothing about this machine: another vendor's backend ("no NVIDIA GPU found" on an
# AMD host; backends.base.NO_VENDOR_GPU, kept apart so reports need not import the backends) and a
# trace preset's refusal of backends that cannot do it.
OTHER_MACHINE_CAUSES = frozenset({"no-vendor-gpu", "preset-backend"})


def machine_fallbacks(run: "RunStory") -> tuple[tuple[Fallback, ...], tuple[str, ...]]:
    """The fallbacks that concern the machine the run was made on, and the backends left unshown."""
    shown = tuple(f for f in run.fallbacks if f.cause not in OTHER_MACHINE_CAUSES)
    hidden = tuple(f.backend for f in run.fallbacks if f.cause in OTHER_MACHINE_CAUSES)
    return shown, hidden


@dataclass(frozen=True)
class Summary:
    """What a report shows of a run, job or folder of files, computed once from its Tables; stored as summary.json."""
    source: SourceInfo
    totals: Totals = field(default_factory=Totals)
    kernels: tuple[KernelRow, ...] = ()
    api: tuple[KernelRow, ...] = ()
    memory_copies: tuple[KernelRow, ...] = ()
    operators: tuple[KernelRow, ...] = ()
    # record_function / user_annotation ranges and ProfilerStep#N, per rank, heaviest first
    annotations: tuple[AnnotationRow, ...] = ()
    counters_by_kernel: tuple[dict[str, Any], ...] = ()  # kernel, then one column per counter/metric
    counter_aggregation: dict[str, str] = field(default_factory=dict)  # column -> how it was aggregated
    derived: tuple[str, ...] = ()
    ranks: tuple[RankSummary, ...] = ()
    kernel_time_spread: KernelTimeSpread | None = None
    # How kernel durations were measured when not by a trace: a counter run's replay is slower
    kernel_timing: str | None = None
    hotspots: tuple[Hotspot, ...] = ()  # PC sampling, most samples first (the top MAX_HOTSPOTS)
    stall_reasons: tuple[StallReason, ...] = ()
    timing: TimingStats | None = None
    step_time: StepTime | None = None  # steady-state step time of a Python workload (profile)
    timeline: TimelineAnalysis | None = None  # idle, overlap, launch-bound, steps (traces with timestamps)
    roofline: RooflineResult | None = None  # per-kernel roofline (counters --set roofline; analysis/roofline.py)
    # operators recorded with shapes, every rank's (placed under the roofline by the report, which knows the GPU:
    # analysis/operator_roofline.py)
    operator_shapes: tuple[OperatorShape, ...] = ()
    memory: tuple[MemoryReport, ...] = ()  # torch's memory history replayed, per rank and device (formats/memory_history.py)
    collective_calls: CollectiveCalls | None = None  # call by call, matched across ranks (analysis/collective_calls.py)
    inspector: tuple[InspectorRecord, ...] = ()  # the NCCL/RCCL inspector's own records, where the job wrote them
    diagnosis: Diagnosis | None = None  # why the GPU waits, the straggler, what failed first (findings)
    power: PowerSummary | None = None  # GPU power, energy, peak memory sampled during the run (telemetry.csv)
    perfetto_trace: str | None = None
    run: RunStory | None = None
    metadata: RunMetadata | None = None  # date, host, GPU, versions, tool, command (read/load.py)
    job: JobManifest | None = None  # a SLURM job's ranks, nodes and statuses (profilectl under srun)
    status: str | None = None
    notes: tuple[str, ...] = ()
    cache_hit: bool = False
    schema_version: int = SUMMARY_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)  # what dataclasses.asdict gives, without its deep copies (3,000 rows: 10x faster)

    def encode(self) -> bytes:
        """The summary as JSON bytes, as `decode` reads them back: msgspec encodes the dataclasses
        straight (a 400 k-dispatch summary 5 ms, against 45 ms through to_dict and json); json where
        msgspec is missing or refuses a value."""
        try:
            import msgspec
            return msgspec.json.encode(self, enc_hook=str)
        except (ImportError, TypeError):
            return json.dumps(self.to_dict(), default=str, ensure_ascii=False).encode()

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.to_dict(), indent=None)  # machine-read: compact, C encoder

    @classmethod
    def from_dict(cls, data: Any, source: str | Path) -> "Summary":
        _import_field_types()
        return load_typed(cls, data, source, "profilectl summary")

    @classmethod
    def read(cls, path: Path) -> "Summary":
        """The stored summary (a cached or finished run's): msgspec decodes the JSON straight into
        these dataclasses (the values dacite builds, ~9x faster, and no dacite import on the hot
        path); a file it does not accept takes the general path, which names what is wrong."""
        try:
            import msgspec
        except ImportError:
            return cls.from_dict(read_json(path), path)
        _import_field_types()
        try:
            return msgspec.json.decode(path.read_bytes(), type=cls)
        except (msgspec.ValidationError, msgspec.DecodeError, OSError):
            return cls.from_dict(read_json(path), path)

    @classmethod
    def decode(cls, data: bytes, source: str) -> "Summary":
        """A summary from its JSON bytes (a cache entry's); FormatError naming `source` when it does not fit."""
        try:
            import msgspec
            _import_field_types()
            return msgspec.json.decode(data, type=cls)
        except ImportError:
            pass
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            pass  # the general path names what is wrong
        try:
            plain = json.loads(data)
        except (ValueError, RecursionError):
            raise FormatError(f"{source}: not valid JSON") from None
        return cls.from_dict(plain, source)


RANK_COLUMNS = ("rank", "host", "basis", "total_ns", "dispatches", "collective_percent", "top_kernel", "status")


def job_line(summary: "Summary") -> str | None:
    job = summary.job
    if job is None:
        return None
    return (f"SLURM job {job.job_id}.{job.step_id} ({job.service}): {job.status}: {job.message}; nodes "
            f"{', '.join(job.nodes) or '-'}")


def _seconds(value: float) -> str:
    from profilectl.model.units import duration_s  # the one formatter of every human-read report
    return duration_s(value)


def step_time_line(summary: "Summary") -> str | None:
    """The steady-state step time beside the process wall time, in one line."""
    steps = summary.step_time
    if steps is None:
        return None
    warm = (f"; {steps.warmup_steps} warm-up step(s) per run apart: {', '.join(map(_seconds, steps.warmup_s))}"
            if steps.warmup_steps else "")
    line = (f"steady-state step: median {_seconds(steps.median_s)} (p95 {_seconds(steps.p95_s)}, min "
            f"{_seconds(steps.min_s)}, max {_seconds(steps.max_s)}; {steps.steps} steps over {steps.runs} run(s){warm})")
    if summary.timing:
        share = 100.0 * steps.loop_s / summary.timing.median_s if summary.timing.median_s else 0.0
        line += (f"; the loop takes {_seconds(steps.loop_s)} of the process's {_seconds(summary.timing.median_s)} "
                 f"median wall time ({share:.0f} %: the rest is start-up and set-up)")
    return line


def imbalance_line(summary: "Summary") -> str | None:
    """The straggler when the diagnosis names one (from waiting); else the spread of GPU time,
    which names no straggler (a rank waiting for another has as much GPU time as it)."""
    diagnosis = summary.diagnosis
    found = next((f for f in diagnosis.findings if f.verdict == "straggler"), None) if diagnosis else None
    if found is not None:
        return found.sentence
    spread = summary.kernel_time_spread
    if spread is None:
        return None
    what = "kernel time" if spread.basis == "gpu" else "CPU time in operators"
    line = (f"{what} per rank: rank {spread.most} has {spread.percent:.1f} % more than rank {spread.least} "
            "(relative to the least; a spread of GPU time names no straggler: waiting ranks spin in NCCL kernels)")
    if diagnosis is not None and diagnosis.stragglers is not None and diagnosis.stragglers.why_none:
        line += f"; no straggler named: {diagnosis.stragglers.why_none}"
    return line


_FIELDS: dict[type, tuple[str, ...]] = {}


def _plain(value: Any) -> Any:
    """dataclasses.asdict for values made of dataclasses, tuples, lists, dicts and scalars."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    names = _FIELDS.get(kind)
    if names is None and dataclasses.is_dataclass(value):
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, (tuple, list)):
        return kind(_plain(v) for v in value) if kind in (tuple, list) else [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def aggregation_legend(summary: "Summary") -> list[str]:
    """'<how>: column, column' lines for the counters table (how each value was aggregated)."""
    groups: dict[str, list[str]] = {}
    for column, words in summary.counter_aggregation.items():
        groups.setdefault(words, []).append(column)
    return [f"{words}: {', '.join(columns)}" for words, columns in groups.items()]


def kernel_rows(stats: StatsByName) -> tuple[KernelRow, ...]:
    """Kernels, API calls, copies: heaviest total first, `percent` the share of the sum of totals
    (these never nest, so the totals add up)."""
    grand = sum(s.total for s in stats.values()) or 1.0
    rows = [KernelRow(name=name, calls=s.calls, total_ns=s.total, mean_ns=s.mean, percent=100.0 * s.total / grand,
                      min_ns=s.minimum if s.spread_known else None, max_ns=s.maximum if s.spread_known else None,
                      std_ns=s.std if s.spread_known else None, self_ns=s.self_total)
            for name, s in stats.items()]
    rows.sort(key=lambda r: r.total_ns, reverse=True)
    return tuple(rows)


def operator_rows(stats: StatsByName) -> tuple[KernelRow, ...]:
    """CPU operators: they nest (aten::linear holds aten::addmm), so inclusive totals count the same
    time several times and add up to more than the run. Where every self time is known (torch's
    "Self CPU"), rows are ranked by it and `percent` is the share of the sum of self times, which adds
    up to 100 %; operators without nesting (XLA's HLO ops) keep their totals (docs/definitions.md)."""
    rows = kernel_rows(stats)
    if not rows or any(r.self_ns is None for r in rows):
        return rows
    grand = sum(r.self_ns or 0.0 for r in rows) or 1.0
    ranked = [dataclasses.replace(r, percent=100.0 * (r.self_ns or 0.0) / grand) for r in rows]
    ranked.sort(key=lambda r: (-(r.self_ns or 0.0), -r.total_ns, r.name))
    return tuple(ranked)


MAX_HOTSPOTS = 1000


def hotspots(samples: dict[tuple[str, str, str], int]) -> tuple[Hotspot, ...]:
    total = sum(samples.values()) or 1
    ranked = sorted(samples.items(), key=lambda item: -item[1])[:MAX_HOTSPOTS]
    return tuple(Hotspot(kernel=k, instruction=i, source=s, samples=n, percent=100.0 * n / total)
                 for (k, i, s), n in ranked)


def stall_reasons(stalls: dict[str, int]) -> tuple[StallReason, ...]:
    total = sum(stalls.values()) or 1
    return tuple(StallReason(reason=r, samples=n, percent=100.0 * n / total)
                 for r, n in sorted(stalls.items(), key=lambda item: -item[1]))


def rank_summaries(rows: tuple[RankRow, ...]) -> tuple[RankSummary, ...]:
    """Rows of the same rank (several files of one process) combined; ranks in numeric order."""
    merged: dict[tuple[str, str | None], RankRow] = {}
    for row in rows:
        key = (row.rank, row.host)
        before = merged.get(key)
        if before is None:
            merged[key] = row
            continue
        heavier = row if row.top_kernel_ns > before.top_kernel_ns else before
        merged[key] = dataclasses.replace(before, kernels=max(before.kernels, row.kernels),
                                          dispatches=before.dispatches + row.dispatches,
                                          total_ns=before.total_ns + row.total_ns,
                                          collective_ns=before.collective_ns + row.collective_ns,
                                          top_kernel=heavier.top_kernel, top_kernel_ns=heavier.top_kernel_ns,
                                          status=before.status or row.status,
                                          failed_unix_ns=before.failed_unix_ns or row.failed_unix_ns,
                                          error=before.error or row.error, signal=before.signal or row.signal,
                                          basis="gpu" if "gpu" in (before.basis, row.basis) else
                                          before.basis or row.basis)

    def order(key: tuple[str, str | None]) -> tuple[int, str, str]:
        rank, host = key
        return (int(rank) if rank.isdigit() else 1 << 30, rank, host or "")
    if len(merged) < 2:
        return ()  # one process: the run's own tables say it all
    return tuple(RankSummary(rank=r.rank, host=r.host, kernels=r.kernels, dispatches=r.dispatches, total_ns=r.total_ns,
                             collective_ns=r.collective_ns,
                             collective_percent=100.0 * r.collective_ns / r.total_ns if r.total_ns else 0.0,
                             top_kernel=r.top_kernel, status=r.status, basis=r.basis or "gpu",
                             failed_unix_ns=r.failed_unix_ns, error=r.error, signal=r.signal)
                 for _, r in sorted(merged.items(), key=lambda item: order(item[0])))


def kernel_time_spread(ranks: tuple[RankSummary, ...]) -> KernelTimeSpread | None:
    basis = "gpu" if any(r.basis == "gpu" and r.total_ns > 0 for r in ranks) else "cpu"
    timed = [r for r in ranks if r.total_ns > 0 and r.basis == basis]  # GPU and CPU times do not compare
    if len(timed) < 2:
        return None
    slow = max(timed, key=lambda r: r.total_ns)
    fast = min(timed, key=lambda r: r.total_ns)
    label = (lambda r: f"{r.rank}" + (f" ({r.host})" if r.host else ""))
    return KernelTimeSpread(most=label(slow), most_ns=slow.total_ns, least=label(fast), least_ns=fast.total_ns,
                         percent=100.0 * (slow.total_ns - fast.total_ns) / fast.total_ns, basis=basis)


def timeline_of(tables: Tables) -> TimelineAnalysis | None:
    if not tables.timelines:
        return None
    from profilectl.analysis.timeline import analyse
    return analyse(tables.timelines)


def diagnosis_of(tables: Tables, timeline: TimelineAnalysis | None,
                 ranks: tuple[RankSummary, ...]) -> tuple[Diagnosis | None, TimelineAnalysis | None]:
    """The diagnosis, and the timeline with its one-line verdict taken from the top finding (the
    `verdict` fields stay for readers of summary.json)."""
    from profilectl.analysis.diagnosis import diagnose
    from profilectl.analysis.steps import profiler_cost
    found = diagnose(tables.timelines, timeline, ranks, largest_copies(tables), profiler_cost(tables.hook_steps))
    return _with_verdicts(found, timeline)


def _with_verdicts(found: Diagnosis | None, timeline: TimelineAnalysis | None
                   ) -> tuple[Diagnosis | None, TimelineAnalysis | None]:
    if found is None or timeline is None or not found.findings:
        return found, timeline
    top = found.findings[0]
    merged = dataclasses.replace(timeline.merged, verdict=top.sentence, launch_bound=top.verdict == "launch-bound")
    per_rank = []
    for row in timeline.ranks:
        own = next((f for f in found.findings if f.scope and f.scope.startswith(f"rank {row.rank},")), None)
        per_rank.append(dataclasses.replace(row, verdict=own.sentence.split(": ", 1)[-1], launch_bound=own.verdict ==
                                            "launch-bound") if own else row)
    return found, dataclasses.replace(timeline, merged=merged, ranks=tuple(per_rank))


def largest_copies(tables: Tables, count: int = 3) -> tuple[tuple[str, float], ...]:
    """The copies (and memsets) with the most GPU time: a data-movement verdict's evidence."""
    ranked = sorted(tables.memory_copies.items(), key=lambda item: -item[1].total)[:count]
    return tuple((name, float(stats.total)) for name, stats in ranked)


def reduced_diagnosis(reduced: "Sequence[RankReduction]", ranks: tuple[RankSummary, ...],
                      copies: tuple[tuple[str, float], ...] = (), cost: "ProfilerCost | None" = None
                      ) -> tuple[Diagnosis | None, TimelineAnalysis | None]:
    """diagnosis_of, from the ranks' reductions instead of their events."""
    from profilectl.analysis.diagnosis import diagnose_reduced
    from profilectl.analysis.reduce import merge
    timeline, idle, stragglers = merge(reduced)
    found = diagnose_reduced(idle, stragglers, timeline, ranks, copies, cost)
    return _with_verdicts(found, timeline)


def _timeline_notes(tables: Tables) -> tuple[str, ...]:
    """Kernels without timestamps (statistics files, counter runs): say why there is no timeline."""
    said = any(note.startswith("no timeline analysis") for note in tables.notes)
    if tables.kernels and not tables.timelines and not tables.counters and not said:
        kinds = ", ".join(sorted({s.kind for s in tables.sources})) or "these files"
        return (f"no timeline analysis: {kinds} hold no kernel timestamps (a trace does: trace service, "
                "rocprofv3 --kernel-trace, torch.profiler)",)
    return ()


WARMUP_STEPS = 2  # per run, at most: enough for CUDA context creation and first-call autotuning


def step_time(ends_per_run: tuple[tuple[int, ...], ...]) -> StepTime | None:
    """Step times of the timed runs: intervals between step ends, the first ones of each run apart."""
    intervals = [[(b - a) / 1e9 for a, b in zip(ends, ends[1:])] for ends in ends_per_run if len(ends) >= 2]
    if not intervals:
        return None
    warmup = min(WARMUP_STEPS, min(len(run) for run in intervals) - 1)  # at least one steady step per run
    steady = sorted(t for run in intervals for t in run[warmup:])
    warm = tuple(statistics.median(run[i] for run in intervals) for i in range(warmup))
    p95_index = max(0, min(len(steady) - 1, round(0.95 * (len(steady) - 1))))
    return StepTime(runs=len(intervals), steps=len(steady), warmup_steps=warmup, median_s=statistics.median(steady),
                    mean_s=statistics.fmean(steady), p95_s=steady[p95_index], min_s=steady[0], max_s=steady[-1],
                    std_s=statistics.pstdev(steady) if len(steady) > 1 else 0.0, warmup_s=warm,
                    loop_s=statistics.median((ends[-1] - ends[0]) / 1e9 for ends in ends_per_run if len(ends) >= 2))


def timing_stats(seconds: tuple[float, ...]) -> TimingStats | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    p95_index = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return TimingStats(runs=len(ordered), mean_s=statistics.fmean(ordered), median_s=statistics.median(ordered),
                       p95_s=ordered[p95_index], min_s=ordered[0], max_s=ordered[-1],
                       std_s=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0)


def counters_by_kernel(values: tuple[CounterValue, ...], derived: dict[str, str],
                       kernel_order: list[str]) -> tuple[tuple[dict[str, Any], ...], dict[str, str]]:
    """Wide table, one row per kernel (heaviest GPU time first), one column per counter, then the
    derived metrics; and how each column was aggregated over dispatches (the legend)."""
    if not values:  # no counters: nothing to aggregate (and countersets' module unimported)
        return (), {}
    from profilectl.countersets import aggregation, evaluate
    merged: dict[tuple[str, str], CounterValue] = {}
    for value in values:
        key = (value.kernel, value.counter)
        merged[key] = merged[key].combined(value) if key in merged else value
    kernels: dict[str, dict[str, Any]] = {}
    legend: dict[str, str] = {}
    for (kernel, counter), value in merged.items():
        rule = aggregation(counter, value.unit)
        kernels.setdefault(kernel, {"kernel": kernel})[counter] = value.value(rule)
        words = AGGREGATION_WORDS[rule if rule != "mean" or value.duration_weighted else "mean per dispatch"]
        if legend.get(counter) != AGGREGATION_WORDS["mean per dispatch"]:  # one kernel without durations says so
            legend[counter] = words
    for row in kernels.values():
        numbers = {k: v for k, v in row.items() if k != "kernel"}
        for name, expression in derived.items():
            result = evaluate(expression, numbers)
            if result is not None:
                row[name] = result
                legend[name] = AGGREGATION_WORDS["derived"]
    rank = {name: i for i, name in enumerate(kernel_order)}
    rows = sorted(kernels.values(), key=lambda row: rank.get(row["kernel"], len(rank)))
    return tuple(rows), legend


def build(tables: Tables, source: SourceInfo, derived: dict[str, str] | None = None,
          perfetto_trace: str | None = None, reduced: "Sequence[RankReduction] | None" = None) -> Summary:
    """`reduced`: the ranks' timelines already reduced (a job's partials, read/partials.py), in
    place of tables.timelines; given (even empty) only where the files had timelines."""
    kernels = kernel_rows(tables.kernels)
    copies = kernel_rows(tables.memory_copies)
    by_kernel, legend = counters_by_kernel(tables.counters, derived or {}, [k.name for k in kernels])
    ranked = rank_summaries(tables.ranks)
    if reduced is None:
        diagnosis, timeline = diagnosis_of(tables, timeline_of(tables), ranked)
    else:
        from profilectl.analysis.steps import profiler_cost
        diagnosis, timeline = reduced_diagnosis(reduced, ranked, largest_copies(tables), profiler_cost(tables.hook_steps))
    summary = Summary(
        source=source,
        totals=totals_of(kernels, copies),
        kernels=kernels, api=kernel_rows(tables.api), memory_copies=copies,
        operators=operator_rows(tables.operators),
        annotations=tuple(sorted(tables.annotations, key=lambda row: (row.rank, -row.total_ns, row.name))),
        counters_by_kernel=by_kernel, counter_aggregation=legend,
        derived=tuple(sorted((derived or {}).keys())),
        ranks=ranked, kernel_time_spread=kernel_time_spread(ranked), diagnosis=diagnosis,
        hotspots=hotspots(tables.pc_samples), stall_reasons=stall_reasons(tables.stall_reasons),
        kernel_timing=tables.kernel_timing or None,
        timing=timing_stats(tables.timing_s), step_time=step_time(tables.step_ends_ns), perfetto_trace=perfetto_trace,
        timeline=timeline, notes=tables.notes + (_timeline_notes(tables) if reduced is None else ()),
        roofline=roofline_of(by_kernel, kernels), operator_shapes=tables.operator_shapes, memory=tables.memory,
        collective_calls=collective_calls_of(tables), inspector=tables.inspector)
    from profilectl.analysis.roofline import workload_placement
    placed = workload_placement(by_kernel)  # a whole-workload speed-of-light (rocprof-compute analyze)
    return dataclasses.replace(summary, notes=summary.notes + (placed,)) if placed else summary


def collective_calls_of(tables: Tables) -> CollectiveCalls | None:
    from profilectl.analysis.collective_calls import analyse
    return analyse(tables.collectives, tables.clocks)


def totals_of(kernels: Sequence[KernelRow], copies: Sequence[KernelRow]) -> Totals:
    """The one place GPU time is added up: kernels and copies (with memsets), each activity once."""
    kernel_ns = sum(k.total_ns for k in kernels)
    copy_ns = sum(c.total_ns for c in copies)
    return Totals(kernels=len(kernels), dispatches=sum(k.calls for k in kernels), gpu_time_ns=kernel_ns + copy_ns,
                  kernel_time_ns=kernel_ns, copy_time_ns=copy_ns, copies=sum(c.calls for c in copies))


def roofline_of(rows: tuple[dict[str, Any], ...], kernels: tuple[KernelRow, ...]) -> RooflineResult | None:
    """The roofline when the counters hold its columns (peaks measured by the tool only: the GPU's
    datasheet peaks are added where the report knows the GPU, analysis.roofline.analyse)."""
    from profilectl.analysis.roofline import analyse_rows, speed_of_light_rows
    times = {k.name: (k.calls, k.total_ns) for k in kernels}
    return analyse_rows(rows, times) or speed_of_light_rows(rows, times)
