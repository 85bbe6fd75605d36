"""Any PATH -> a summary: a profilectl run directory (stored summary.json), or a directory or file
that rocprofv3, rocprof, ncu or torch.profiler wrote by hand (read once, then cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilectl.formats import FormatError, detect
from profilectl.formats.common import read_json
from profilectl.report import cache, summary


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def load(path: Path) -> dict[str, Any]:
    path = Path(path)
    if is_run_dir(path):
        manifest = read_json(path / "manifest.json")
        stored = path / "summary.json"
        if stored.is_file():
            result = read_json(stored)
        else:  # a run killed before it could summarise: read what its profiler left in raw/
            result = _from_files(path / "raw")
            result["notes"] = ["no summary.json (the run did not finish): summarised from raw/ now"]
        result["run"] = summary.run_story(manifest)
        result["source"] = {"kind": "profilectl-run", "path": str(path)}
        return result
    if path.is_dir():
        runs_inside = list(path.glob("*/manifest.json"))
        if runs_inside:  # a traces folder: merging every run's raw files would mean nothing
            raise FormatError(f"{path} is a traces folder with {len(runs_inside)} runs: list them with "
                              f"`profilectl ls {path}` and report one run directory")
    sources = detect.detect(path)
    files = [f for s in sources for f in s.files]
    result, hit = cache.cached(path, files, lambda: _summarise(path, sources))
    result["cache_hit"] = hit
    return result


def _from_files(path: Path) -> dict[str, Any]:
    try:
        return _summarise(path, detect.detect(path))
    except FormatError:
        return summary.build({}, {"kind": "empty", "path": str(path)})


def _summarise(path: Path, sources) -> dict[str, Any]:
    tables = detect.read(sources)
    source = {"kind": "+".join(s.kind for s in sources), "path": str(path),
              "files": [str(f) for s in sources for f in s.files]}
    traces = detect.trace_files(path, sources)
    return summary.build(tables, source, perfetto_trace=str(traces[0]) if traces else None)
