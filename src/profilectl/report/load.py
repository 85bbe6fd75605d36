"""Any PATH -> a Summary: a profilectl run directory (its stored summary.json), or a folder or file
that rocprofv3, rocprof, ncu or torch.profiler wrote by hand (read once, then cached).

A run whose profilectl is gone while its manifest still says `running` is reported as `abandoned`
with what it left. A folder or file whose recognised files hold no records (a header-only CSV, an
empty trace) is an error, not an empty report: nothing there can be reported."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from profilectl.errors import FormatError
from profilectl.formats.reader import read_groups, read_path, recognised
from profilectl.manifest import Manifest
from profilectl.report import cache
from profilectl.report.listing import run_state
from profilectl.report.summary import RunStory, SourceInfo, Summary, build


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def load_job(path: Path) -> Summary:
    """A SLURM job directory: every rank's raw files read together (merged tables), one per-rank
    row per rank directory (its status from its manifest, or `lost`), and the job's story."""
    from profilectl import jobs
    from profilectl.backends import READERS
    from profilectl.formats.ranks import rank_row
    from profilectl.formats.tables import Tables, merge_all
    job = jobs.compose(path)
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

    result, hit = cache.cached(path, files + [path / rank.run / "manifest.json" for rank in job.ranks], summarise)
    story = dataclasses.replace(result, job=job, cache_hit=hit)
    # the ranks' statuses can change without a file of theirs changing (a lost node): always live
    live = {str(r.rank): r.status for r in job.ranks}
    return dataclasses.replace(story, ranks=tuple(dataclasses.replace(r, status=live.get(r.rank, r.status))
                                                  for r in story.ranks))


def load(path: Path) -> Summary:
    path = Path(path)
    from profilectl import jobs
    if jobs.is_job_dir(path):
        return load_job(path)
    if is_run_dir(path):
        manifest = Manifest.read(path)
        stored = path / "summary.json"
        if stored.is_file():
            result = Summary.read(stored)
        else:  # a run killed before it could summarise: read what its profiler left in raw/
            from profilectl.backends import READERS  # the registry (imported only where files are read)
            tables = read_path(path / "raw", READERS, required=False)
            result = build(tables, SourceInfo(kind="profilectl-run", path=str(path)))
            result = dataclasses.replace(result, notes=("no summary.json (the run did not finish): "
                                                        "summarised from raw/ now",) + result.notes)
        story = RunStory.of(manifest)
        status, note = run_state(path, manifest)
        if note:  # running or abandoned: the manifest has no message yet
            story = dataclasses.replace(story, status=status, message=note)
        return dataclasses.replace(result, run=story, source=SourceInfo(kind="profilectl-run", path=str(path)))
    if path.is_dir():
        runs_inside = list(path.glob("*/manifest.json")) + [p for p in path.iterdir() if jobs.is_job_dir(p)]
        if runs_inside:  # a traces folder: merging every run's raw files would mean nothing
            raise FormatError(f"{path} is a traces folder with {len(runs_inside)} runs: list them with "
                              f"`profilectl ls {path}` and report one run directory")
    from profilectl.backends import READERS  # the registry: every backend's readers
    groups = recognised(path, READERS)
    files = [f for _, group in groups for f in group]

    def summarise() -> Summary:
        tables = read_groups(groups)
        source = SourceInfo(kind="+".join(s.kind for s in tables.sources), path=str(path),
                            files=tuple(f for s in tables.sources for f in s.files))
        return build(tables, source, perfetto_trace=tables.trace_files[0] if tables.trace_files else None)

    result, hit = cache.cached(path, files, summarise)
    if not has_records(result):
        kinds = ", ".join(dict.fromkeys(reader.kind for reader, _ in groups))
        raise FormatError(f"{path}: no records in it: {len(files)} {kinds} file(s) recognised, but they hold "
                          f"no kernels, calls, counters or timings (header only, or an empty trace?)")
    return dataclasses.replace(result, cache_hit=hit)


def has_records(summary: Summary) -> bool:
    return bool(summary.kernels or summary.api or summary.memory_copies or summary.operators
                or summary.counters_by_kernel or summary.timing or summary.ranks or summary.hotspots)
