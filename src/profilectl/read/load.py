"""Any PATH -> a Summary: a profilectl run directory (its stored summary.json), or a folder or file
that rocprofv3, rocprof, ncu or torch.profiler wrote by hand (read once, then cached).

A run whose profilectl is gone while its manifest still says `running` is reported as `abandoned`
with what it left. A folder or file whose recognised files hold no records (a header-only CSV, an
empty trace) is an error, not an empty report: nothing there can be reported."""

from __future__ import annotations

import dataclasses
import datetime
import re
from pathlib import Path
from typing import TYPE_CHECKING

from profilectl.errors import FormatError, ProfilectlError
from profilectl.formats.reader import numpy_without_huge_page_hints, read_groups, read_path, recognised
from profilectl.read import cache
from profilectl.runstate import run_state
from profilectl.read.summary import SUMMARY_SCHEMA, RunMetadata, RunStory, SourceInfo, Summary, build

if TYPE_CHECKING:
    from profilectl.analysis.windows import WindowRequest
    from profilectl.jobs import JobManifest
    from profilectl.manifest import Manifest
    from collections.abc import Iterable, Iterator

    from profilectl.read.partials import Partial, RankResult


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def load_job(path: Path, raw: bool = False) -> Summary:
    """A SLURM job directory, merged from its ranks' partials (read/partials.py: one small file per
    rank, made where the rank ran; a stale or missing one is rebuilt from that rank's raw files and
    stored back), one per-rank row per rank directory (its status from its manifest, or `lost`),
    and the job's story. `raw`: read every rank's raw files instead (the same numbers, slower)."""
    from profilectl import jobs
    job = jobs.compose(path)
    if raw:
        result, hit = _job_from_raw(path, job)
        notes: tuple[str, ...] = ()
    else:
        result, notes = _job_from_partials(path, job)
        hit = False
    story = dataclasses.replace(result, job=job, cache_hit=hit, metadata=job_metadata(path, job),
                                notes=result.notes + notes)
    # the ranks' statuses can change without a file of theirs changing (a lost node): always live
    live = {str(r.rank): r.status for r in job.ranks}
    return dataclasses.replace(story, ranks=tuple(dataclasses.replace(r, status=live.get(r.rank, r.status))
                                                  for r in story.ranks))


def _job_from_partials(path: Path, job: "JobManifest") -> tuple[Summary, tuple[str, ...]]:
    """O(ranks) small reads, one rank at a time (each partial is folded in and dropped); a rank's raw
    files are read only where its partial is stale or missing."""
    from profilectl.read import partials

    def with_row(result: "RankResult") -> "RankResult":
        # a rank of this folder without numbers (a lost node's) keeps its row and status, as in the raw read
        if result.partial is not None:
            return result
        empty = partials.make(path / result.rank.run / "raw", result.rank, files=())
        return dataclasses.replace(result, partial=empty)
    return job_summary(path, job, (with_row(partials.for_rank(path, rank)) for rank in job.ranks))


def job_summary(path: Path, job: "JobManifest", results: "Iterable[RankResult]") -> tuple[Summary, tuple[str, ...]]:
    """The job's summary from its ranks' partials, with their statuses as the job says now, and the
    notes that name the ranks rebuilt, read from partials only, or missing."""
    from profilectl.read import partials
    statuses = {r.rank: r.status for r in job.ranks}
    notes: list[str] = []
    rebuilt: list[int] = []
    seen = 0

    def used() -> "Iterator[Partial]":
        nonlocal seen
        for result in results:
            seen += 1
            if result.note:
                notes.append(result.note)
            if result.how == "rebuilt":
                rebuilt.append(result.rank.rank)
            if result.partial is not None:
                status = statuses.get(result.rank.rank)
                yield dataclasses.replace(result.partial, ranks=tuple(
                    dataclasses.replace(row, status=status or row.status) for row in result.partial.ranks))
    summary = partials.summary_of(path, used())
    if rebuilt:
        notes.append(f"{len(rebuilt)} of {seen} rank(s) read from raw files (no fresh partial): "
                     + ", ".join(map(str, rebuilt[:20])) + (" ..." if len(rebuilt) > 20 else ""))
    return summary, tuple(notes)


def _job_from_raw(path: Path, job: "JobManifest") -> tuple[Summary, bool]:
    """Every rank's raw files read together (merged tables), cached per set of files."""
    from profilectl.formats.registry import READERS
    from profilectl.formats.ranks import rank_row
    from profilectl.model.tables import Tables, merge_all
    files = [f for rank in job.ranks for f in (path / rank.run / "raw").rglob("*") if f.is_file()]

    def summarise() -> Summary:
        parts = []
        for rank in job.ranks:
            tables = read_path(path / rank.run / "raw", READERS, required=False)
            row = dataclasses.replace(rank_row(str(rank.rank), rank.host, tables.kernels, tables.operators), status=rank.status)
            parts.append(dataclasses.replace(tables, ranks=(row,)))
        merged: Tables = merge_all(parts)
        return build(merged, SourceInfo(kind="profilectl-job", path=str(path)),
                     perfetto_trace=merged.trace_files[0] if merged.trace_files else None)

    return cache.cached(path, files + [path / rank.run / "manifest.json" for rank in job.ranks], summarise)


def load(path: Path, raw: bool = False) -> Summary:
    """`raw`: a job directory is read from every rank's raw files, not from their partials."""
    path = Path(path)
    from profilectl import jobs
    if jobs.is_job_dir(path):
        return load_job(path, raw=raw)
    if is_run_dir(path):
        from profilectl.manifest import Manifest
        manifest = Manifest.read(path)
        stored = path / "summary.json"
        result = Summary.read(stored) if stored.is_file() else None
        if result is None or result.schema_version != SUMMARY_SCHEMA:
            # a run killed before it could summarise, or summarised by an older profilectl (another
            # schema: docs/definitions.md's migration note): read what its profiler left in raw/
            from profilectl.formats.registry import READERS  # the registry (imported only where files are read)
            why = "the run did not finish" if result is None else \
                f"it has schema {result.schema_version}, this profilectl writes {SUMMARY_SCHEMA}"
            tables = read_path(path / "raw", READERS, required=False)
            result = build(tables, SourceInfo(kind="profilectl-run", path=str(path)))
            result = dataclasses.replace(result, notes=(f"summary.json not used ({why}): summarised from raw/ now",)
                                         + result.notes)
        if result.power is None and (path / "telemetry.csv").is_file():  # sampled, but never summarised
            from profilectl.telemetry.energy import summarise_file
            try:
                result = dataclasses.replace(result, power=summarise_file(path / "telemetry.csv"))
            except OSError as exc:
                result = dataclasses.replace(result, notes=result.notes + (
                    f"telemetry.csv left out: {exc.strerror or exc}",))
        story = RunStory.of(manifest)
        status, note = run_state(path, manifest)
        if note:  # running or abandoned: the manifest has no message yet
            story = dataclasses.replace(story, status=status, message=note)
        metadata, problem = run_metadata(path, manifest)
        return dataclasses.replace(result, run=story, source=SourceInfo(kind="profilectl-run", path=str(path)),
                                   metadata=metadata, notes=result.notes + ((problem,) if problem else ()))
    if path.is_dir():
        runs_inside = list(path.glob("*/manifest.json")) + [p for p in path.iterdir() if jobs.is_job_dir(p)]
        if runs_inside:  # a traces folder: merging every run's raw files would mean nothing
            raise FormatError(f"{path} is a traces folder with {len(runs_inside)} runs: list them with "
                              f"`profilectl ls {path}` and report one run directory")
    if path.is_dir() and not raw and may_hold_partials(path):  # a bare output reduced per rank (--reduce-here)
        # imported here: bare_partials and read/partials (their dataclasses) only where partials may be
        from profilectl.read import bare_partials
        place = bare_partials.stored_partials(path)
        if place is not None:
            merged = bare_partials.load(path, place)
            # a gone rank's files say nothing; files a partial names outside PATH are never opened
            present = tuple(f for f in merged.source.files if bare_partials.lies_under(f, path) and Path(f).is_file())
            return dataclasses.replace(merged, metadata=files_metadata(dataclasses.replace(
                merged, source=dataclasses.replace(merged.source, files=present))))
    from profilectl.formats.registry import READERS  # the registry: every backend's readers
    groups = recognised(path, READERS)
    files = [f for _, group in groups for f in group]

    def summarise() -> Summary:
        with numpy_without_huge_page_hints():  # the analysis' columns too, not only the reading's
            # ranks reduced as they are read (one rank's events held at a time): the same numbers
            tables = read_groups(groups, reduce_ranks=True)
            source = SourceInfo(kind="+".join(s.kind for s in tables.sources), path=str(path),
                                files=tuple(f for s in tables.sources for f in s.files))
            derived = None
            if tables.counters:  # (countersets imported only where there are counters to derive from)
                from profilectl.countersets import derived_for_files
                derived = derived_for_files({c.counter for c in tables.counters})
            return build(tables, source, derived or None, reduced=tables.reductions,
                         perfetto_trace=tables.trace_files[0] if tables.trace_files else None)

    result, hit = cache.cached(path, files, summarise)
    if not has_records(result):
        kinds = ", ".join(dict.fromkeys(reader.kind for reader, _ in groups))
        raise FormatError(f"{path}: no records in it: {len(files)} {kinds} file(s) recognised, but they hold "
                          f"no kernels, calls, counters or timings (header only, or an empty trace?)")
    return dataclasses.replace(result, cache_hit=hit, metadata=files_metadata(result))


PARTIALS_FOLDER, PARTIAL_SUFFIX = "profilectl-partials", ".partial.json"  # bare_partials.FOLDER, .SUFFIX


def may_hold_partials(folder: Path) -> bool:
    """bare_partials.stored_partials can find partials here (a superset of its answer, asked
    without importing it: a plain folder of profiler files, the usual case, needs none of it)."""
    return (folder / PARTIALS_FOLDER).is_dir() or any(folder.glob(f"*{PARTIAL_SUFFIX}"))


def load_window(path: Path, request: "WindowRequest") -> Summary:
    """A run's or a folder's report restricted to windows (`report --range NAME`, `--steps A:B`:
    analysis/windows.py), read from its files each time (not cached)."""
    from profilectl import jobs
    from profilectl.analysis.windows import restrict, roctx_windows, with_step_marks
    from profilectl.formats.registry import READERS
    path = Path(path)
    if jobs.is_job_dir(path):
        raise FormatError(f"{path}: report {request.describe()} reads a run or a folder of traces; report each "
                          "rank's run of this job")
    run = is_run_dir(path)
    groups = recognised(path / "raw" if run else path, READERS)
    tables = read_groups(groups)
    files = tuple(f for s in tables.sources for f in s.files)
    if request.step_mark is not None:
        tables = with_step_marks(tables, request.step_mark, roctx_windows(files, request.step_mark))
    if request.range_name is not None or request.steps is not None:
        tables = restrict(tables, request, roctx_windows(files, request.range_name))
    result = build(tables, SourceInfo(kind="profilectl-run" if run else "+".join(s.kind for s in tables.sources),
                                      path=str(path), files=files),
                   perfetto_trace=tables.trace_files[0] if tables.trace_files else None)
    return dataclasses.replace(result, metadata=files_metadata(result))


def has_records(summary: Summary) -> bool:
    return bool(summary.kernels or summary.api or summary.memory_copies or summary.operators
                or summary.counters_by_kernel or summary.timing or summary.ranks or summary.hotspots or summary.memory
                or summary.inspector)


# ---------------------------------------------------------------- metadata
def run_metadata(run_dir: Path, manifest: Manifest) -> tuple[RunMetadata, str | None]:
    """A run's metadata from its manifest and env.json (the probe at the run's start); an env.json
    that is missing or unreadable costs its facts only (the problem comes back as a note)."""
    from profilectl.envreport import EnvReport
    env: EnvReport | None = None
    problem = None
    if (run_dir / "env.json").is_file():
        try:
            env = EnvReport.read(run_dir / "env.json")
        except (ProfilectlError, OSError) as exc:
            problem = f"metadata: env.json left out: {exc}"
    facts = env.facts if env else None
    gpu = manifest.gpu or (facts.gpus[0] if facts and facts.gpus else None)
    gpu_text = None
    if gpu is not None:
        gpu_text = " ".join(filter(None, (gpu.name or gpu.vendor.upper(), f"({gpu.arch})" if gpu.arch else None)))
        count = len(facts.gpus) if facts else 0
        gpu_text += f", {count} GPUs on the host" if count > 1 else ""
    nvidia_smi = facts.tools.get("nvidia-smi") if facts else None
    torch = facts.torch if facts else None
    rocm = facts.rocm.version if facts and facts.rocm.version else None
    if rocm and torch and torch.hip:
        rocm += f" (PyTorch's own HIP runtime: {torch.hip})"
    tool = manifest.tool
    profiler = tuple(manifest.argv)
    return RunMetadata(
        started_at=manifest.started_at or None,
        host=(facts.host.hostname if facts else None) or (manifest.controller.hostname if manifest.controller else None),
        gpu=gpu_text, driver=f"NVIDIA {nvidia_smi.version} (nvidia-smi)" if nvidia_smi and nvidia_smi.version else None,
        rocm=rocm, cuda=f"{torch.cuda} (PyTorch's build)" if torch and torch.cuda else None,
        torch=torch.version if torch else None,
        tool=tool.name if tool else manifest.backend, tool_version=tool.version if tool else None,
        profilectl_version=manifest.profilectl_version, command=tuple(manifest.workload),
        profiler_command=profiler if profiler != tuple(manifest.workload) else (),
        backend=manifest.backend, reason=manifest.reason,
        source="manifest.json" + (", env.json" if env else "")), problem


def job_metadata(job_dir: Path, job: "JobManifest") -> RunMetadata | None:
    """A SLURM job's metadata: its first rank's run, with every node of the job."""
    from profilectl.manifest import Manifest
    for rank in job.ranks:
        try:
            manifest = Manifest.read(job_dir / rank.run)
        except (ProfilectlError, OSError):
            continue
        metadata, _ = run_metadata(job_dir / rank.run, manifest)
        return dataclasses.replace(metadata, host=", ".join(job.nodes) or metadata.host,
                                   source=f"{rank.run}/{metadata.source}")
    return None


def files_metadata(summary: Summary) -> RunMetadata:
    """What files a tool wrote by hand say of themselves: the hosts the readers found in their
    names, and a torch.profiler trace's header (GPU, CUDA versions, the clock of its first event)."""
    hosts = sorted({r.host for r in summary.ranks if r.host})
    metadata = RunMetadata(host=", ".join(hosts) or None, tool=summary.source.kind,
                           source="the files' kinds" + (" and names" if hosts else "") + " (no manifest.json)")
    systems = [Path(f) for f in summary.source.files if Path(f).name == "sysinfo.csv"]
    if systems:  # a rocprof-compute workload says which GPU and host it ran on
        from profilectl.formats.rocprof_compute import gpu_of, system_info
        info = system_info(systems[0])
        return dataclasses.replace(metadata, gpu=gpu_of(info), host=info.get("hostname") or metadata.host,
                                   tool="rocprof-compute", source=f"{systems[0].name} (rocprof-compute)")
    traces = [Path(f) for f in summary.source.files if f.endswith((".json", ".json.gz"))]
    for trace in traces[:HEADERS_READ]:
        header = trace_header(trace)
        if header:
            return dataclasses.replace(metadata, source=f"{trace.name} (torch.profiler header)",
                                       tool=header.get("tool", "torch.profiler"), rocm=header.get("rocm"),
                                       gpu=header.get("gpu"), cuda=header.get("cuda"), driver=header.get("driver"),
                                       started_at=header.get("started_at"))
    return metadata


HEADER_BYTES = 1 << 16  # kineto writes its header (device properties, versions) before the events
HEADERS_READ = 8  # of a thousand ranks' files, the first few say what the others would
_NUMBER = r'"{}"\s*:\s*(-?\d+(?:\.\d+)?)'


def trace_header(path: Path) -> dict[str, str]:
    """GPU, CUDA versions and start time from the head of a torch.profiler (kineto) Chrome trace;
    nothing for a file without that header. Read from the first bytes only: the events can be GiBs."""
    from profilectl.formats.chrome_io import open_stream
    try:
        with open_stream(path) as fh:
            head = fh.read(HEADER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return {}
    events_at = head.find('"traceEvents"')
    header = head if events_at < 0 else head[:events_at]
    found: dict[str, str] = {}
    device = re.search(r'"deviceProperties"\s*:\s*\[\s*\{[^}]*?"name"\s*:\s*"([^"]+)"', header)
    if device:
        major = re.search(_NUMBER.format("computeMajor"), header)
        minor = re.search(_NUMBER.format("computeMinor"), header)
        gcn = re.search(r'"gcnArchName"\s*:\s*"([^":]+)', header)  # a ROCm build of PyTorch
        arch = f" ({gcn.group(1)})" if gcn else \
            f" (sm_{major.group(1)}{minor.group(1)})" if major and minor and '"cuda_runtime_version"' in header else ""
        count = len(re.findall(r'"computeMajor"', header))
        found["gpu"] = device.group(1) + arch + (f", {count} GPUs in the trace" if count > 1 else "")
    for key, field in (("cuda_runtime_version", "cuda"), ("cuda_driver_version", "driver")):
        version = re.search(_NUMBER.format(key), header)
        if version and int(float(version.group(1))) > 0:
            number = int(float(version.group(1)))  # CUDA's encoding: 1000 * major + 10 * minor
            text = f"{number // 1000}.{number % 1000 // 10}"
            found[field] = text if field == "cuda" else f"CUDA driver API {text}"
    # A ROCm build of PyTorch says which library collected the GPU activity: roctracer (to ROCm 7.x's
    # PyTorch builds) or rocprofiler-sdk (libkineto RocmActivityProfiler::logGpuVersions writes
    # "rocprofiler-sdk_version" in its place); the events themselves are logged alike by both.
    for key, tracer in (("rocprofiler-sdk_version", "rocprofiler-sdk"), ("roctracer_version", "roctracer")):
        version = re.search(rf'"{key}"\s*:\s*"?([\d.]+)', header)
        if version:
            found["tool"] = f"torch.profiler (Kineto through {tracer} {version.group(1)})"
            break
    hip = re.search(r'"hip_runtime_version"\s*:\s*"?(\d+)', header)
    if hip and int(hip.group(1)) > 0:  # HIP_VERSION: major * 10,000,000 + minor * 100,000 + patch
        number = int(hip.group(1))
        found["rocm"] = f"HIP runtime {number // 10_000_000}.{number // 100_000 % 100}.{number % 100_000}"
    base = re.search(_NUMBER.format("baseTimeNanoseconds"), head)
    first = re.search(_NUMBER.format("ts"), head[events_at:]) if events_at >= 0 else None
    if base and first:  # kineto: an event's epoch time is baseTimeNanoseconds + its ts (µs)
        epoch_s = (float(base.group(1)) + float(first.group(1)) * 1000) / 1e9
        moment = datetime.datetime.fromtimestamp(epoch_s, tz=datetime.timezone.utc)
        found["started_at"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return found


# ---------------------------------------------------------------- per rank (the Python API)
def per_rank(path: Path) -> dict[str, Summary]:
    """Each rank (process) of a multi-rank run on its own, by the rank its files name: a SLURM job's
    rank runs; a run's raw/ or a folder's files grouped by rank (formats/ranks.py). Empty for one
    process. Read from the files, not cached."""
    path = Path(path)
    from profilectl import jobs
    if jobs.is_job_dir(path):
        job = jobs.compose(path)
        return {str(rank.rank): load(path / rank.run) for rank in job.ranks if (path / rank.run).is_dir()}
    from profilectl.formats.registry import READERS
    from profilectl.formats.ranks import identity
    folder = path / "raw" if is_run_dir(path) else path
    try:
        groups = recognised(folder, READERS)
    except FormatError:
        return {}
    by_rank: dict[str, list[tuple[object, list[Path]]]] = {}
    for reader, files in groups:
        split: dict[str, list[Path]] = {}
        for file in files:
            rank = identity(file)[0]
            if rank.isdigit() or rank.startswith("pid "):  # not a rank's own file (a launcher's status file)
                split.setdefault(rank, []).append(file)
        for rank, mine in split.items():
            by_rank.setdefault(rank, []).append((reader, mine))
    if len(by_rank) < 2:
        return {}
    return {rank: build(read_groups(rank_groups),  # type: ignore[arg-type]
                        SourceInfo(kind="+".join(dict.fromkeys(r.kind for r, _ in rank_groups)),  # type: ignore[attr-defined]
                                   path=f"{path} (rank {rank})", files=tuple(str(f) for _, fs in rank_groups for f in fs)))
            for rank, rank_groups in by_rank.items()}
