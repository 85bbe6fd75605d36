"""`profilectl ls`: the runs under a traces folder, newest first, from their manifests alone.

A manifest that cannot be read is listed as `unreadable` with the reason; it never hides the
other runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from profilectl.errors import FormatError
from profilectl.manifest import Manifest


@dataclass(frozen=True)
class ListedRun:
    run: str
    path: str
    started_at: str
    service: str
    backend: str
    status: str
    wall_seconds: float | None
    workload: str
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_runs(traces_root: Path) -> list[ListedRun]:
    runs = []
    for manifest_path in traces_root.glob("*/manifest.json"):
        run_dir = manifest_path.parent
        try:
            manifest = Manifest.read(run_dir)
        except FormatError as exc:
            runs.append(ListedRun(run=run_dir.name, path=str(run_dir), started_at="", service="?", backend="?",
                                  status="unreadable", wall_seconds=None, workload="", problem=str(exc)))
            continue
        runs.append(ListedRun(run=run_dir.name, path=str(run_dir), started_at=manifest.started_at,
                              service=manifest.service, backend=manifest.backend, status=manifest.status,
                              wall_seconds=manifest.wall_seconds, workload=" ".join(manifest.workload)))
    return sorted(runs, key=lambda r: (r.started_at, r.run), reverse=True)
