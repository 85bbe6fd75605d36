"""rank-<R>-<host>-<pid>.status.json: how each rank of a profiled job ended, written by profilectl's
start-up hook in the rank (backends/rank_startup/sitecustomize.py): exit code, exception, steps, and
when each step ended (read as step times for the timed runs of `profile`, raw/steps/run-<N>/)."""

from __future__ import annotations

import re
from pathlib import Path

from profilectl.errors import FormatError
from profilectl.files import read_json
from profilectl.formats.reader import Reader
from profilectl.formats.tables import HookSteps, RankRow, Tables

NAME = re.compile(r"^rank-(?P<rank>[^-]+)-(?P<host>.+)-(?P<pid>\d+)\.status\.json$")
TIMED_RUN = re.compile(r"^run-\d+$")  # raw/steps/run-<N>/: the timing backend's timed runs (warmup-<N>: not)


def status_text(doc: dict[str, object]) -> str:
    code = doc.get("exit_code")
    if doc.get("error"):
        return f"failed: {doc['error']}"
    signal = _integer(doc.get("signal"))
    if signal is not None and code not in (0, None):
        return f"stopped by signal {signal}"
    return "ok" if code in (0, None) else f"exit code {code}"


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class RankStatusReader(Reader):
    kind = "rank-status"

    def recognises(self, path: Path) -> bool:
        return NAME.match(path.name) is not None

    def read_file(self, path: Path) -> Tables:
        doc = read_json(path)
        match = NAME.match(path.name)
        if not isinstance(doc, dict) or match is None:
            raise FormatError(f"{path}: not a profilectl rank status file")
        row = RankRow(rank=str(doc.get("rank", match.group("rank"))), kernels=0, dispatches=0, total_ns=0.0,
                      host=str(doc.get("host") or match.group("host")), status=status_text(doc),
                      failed_unix_ns=_integer(doc.get("failed_unix_ns")),
                      error=str(doc["error"]) if doc.get("error") else None, signal=_integer(doc.get("signal")))
        ends = doc.get("step_ends_ns") or []
        timed = TIMED_RUN.match(path.parent.name) is not None  # a warm-up run's steps are not measured
        if not isinstance(ends, list) or not all(isinstance(t, int) for t in ends):
            return Tables(ranks=(row,))
        if timed:
            return Tables(ranks=(row,), step_ends_ns=(tuple(ends),))
        window = doc.get("profiled_steps")  # a trace's hook: which steps ran under the profiler
        if isinstance(window, list) and len(window) == 2 and all(isinstance(v, int) for v in window):
            return Tables(ranks=(row,), hook_steps=(HookSteps(row.rank, row.host, tuple(ends), (window[0], window[1])),))
        return Tables(ranks=(row,))
