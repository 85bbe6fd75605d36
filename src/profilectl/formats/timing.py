"""The timing backend's own files: timing.json (seconds per timed run) and timing_trace.json (the
runs as a Chrome trace, so a timing-only run still opens in Perfetto)."""

from __future__ import annotations

import math
from pathlib import Path

from profilectl.errors import FormatError
from profilectl.files import read_json
from profilectl.formats.reader import Reader
from profilectl.model.tables import Tables

RESULTS = "timing.json"
TRACE = "timing_trace.json"


def read(path: Path) -> tuple[float, ...]:
    doc = read_json(path)
    runs = doc.get("runs_s") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(s, (int, float)) and math.isfinite(s) for s in runs):
        raise FormatError(f"{path}: not a profilectl timing file (no runs_s list of seconds)")
    return tuple(float(s) for s in runs)


class TimingReader(Reader):
    kind = "timing"

    def recognises(self, path: Path) -> bool:
        return path.name in (RESULTS, TRACE)

    def read(self, files: list[Path]) -> Tables:
        runs = tuple(s for f in files if f.name == RESULTS for s in read(f))
        return Tables(timing_s=runs, trace_files=tuple(str(f) for f in files if f.name == TRACE))
