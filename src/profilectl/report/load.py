"""Any PATH -> a Summary: a profilectl run directory (its stored summary.json), or a folder or file
that rocprofv3, rocprof, ncu or torch.profiler wrote by hand (read once, then cached)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from profilectl.errors import FormatError
from profilectl.formats.reader import read_groups, read_path, recognised
from profilectl.manifest import Manifest
from profilectl.report import cache
from profilectl.report.summary import RunStory, SourceInfo, Summary, build


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def load(path: Path) -> Summary:
    from profilectl.backends import READERS  # the registry: every backend's readers

    path = Path(path)
    if is_run_dir(path):
        manifest = Manifest.read(path)
        stored = path / "summary.json"
        if stored.is_file():
            result = Summary.read(stored)
        else:  # a run killed before it could summarise: read what its profiler left in raw/
            tables = read_path(path / "raw", READERS, required=False)
            result = build(tables, SourceInfo(kind="profilectl-run", path=str(path)))
            result = dataclasses.replace(result, notes=("no summary.json (the run did not finish): "
                                                        "summarised from raw/ now",) + result.notes)
        return dataclasses.replace(result, run=RunStory.of(manifest),
                                   source=SourceInfo(kind="profilectl-run", path=str(path)))
    if path.is_dir():
        runs_inside = list(path.glob("*/manifest.json"))
        if runs_inside:  # a traces folder: merging every run's raw files would mean nothing
            raise FormatError(f"{path} is a traces folder with {len(runs_inside)} runs: list them with "
                              f"`profilectl ls {path}` and report one run directory")
    groups = recognised(path, READERS)
    files = [f for _, group in groups for f in group]

    def summarise() -> Summary:
        tables = read_groups(groups)
        source = SourceInfo(kind="+".join(s.kind for s in tables.sources), path=str(path),
                            files=tuple(f for s in tables.sources for f in s.files))
        return build(tables, source, perfetto_trace=tables.trace_files[0] if tables.trace_files else None)

    result, hit = cache.cached(path, files, summarise)
    return dataclasses.replace(result, cache_hit=hit)
