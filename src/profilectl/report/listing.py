"""`profilectl ls`: the runs under a traces folder, newest first, from their manifests alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def list_runs(traces_root: Path) -> list[dict[str, Any]]:
    runs = []
    for manifest_path in traces_root.glob("*/manifest.json"):
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            runs.append({"run": manifest_path.parent.name, "path": str(manifest_path.parent), "status": "unreadable",
                         "started_at": "", "service": "?", "backend": "?", "wall_seconds": None, "workload": ""})
            continue
        runs.append({"run": manifest_path.parent.name, "path": str(manifest_path.parent),
                     "started_at": manifest.get("started_at") or "", "service": manifest.get("service"),
                     "backend": manifest.get("backend"), "status": manifest.get("status"),
                     "wall_seconds": manifest.get("wall_seconds"),
                     "workload": " ".join(manifest.get("workload") or [])})
    return sorted(runs, key=lambda r: (r["started_at"], r["run"]), reverse=True)
