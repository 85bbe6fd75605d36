"""A run's status as it stands now: `running` while its profilectl holds it, `abandoned` (with what
it left) when that profilectl is gone. Below jobs.py and the report layer, which both ask it."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from profilectl import runs

if TYPE_CHECKING:
    from profilectl.manifest import Manifest

ABANDONED = "abandoned"


def run_state(run_dir: Path, manifest: Manifest) -> tuple[str, str | None]:
    """The run's status as it stands now, and what to say about it: `abandoned` for a `running`
    manifest whose profilectl is gone, with what it left; `running` with who runs it."""
    if manifest.status != "running":
        return manifest.status, None
    gone = controller_gone(run_dir, manifest)
    if gone is None:
        who = f" (profilectl pid {manifest.controller.pid} on {manifest.controller.hostname})" \
            if manifest.controller else ""
        return "running", f"still running{who}"
    return ABANDONED, f"abandoned: {gone}; it left {what_it_left(run_dir)}"


def controller_gone(run_dir: Path, manifest: Manifest) -> str | None:
    """Why the run's profilectl is known to be gone, or None while it may still be running."""
    controller = manifest.controller
    who = f"profilectl (pid {controller.pid} on {controller.hostname})" if controller else "profilectl"
    alive = runs.controller_alive(run_dir)
    if alive is not None:
        return None if alive else f"{who} no longer holds the run's lock"
    if controller is None or controller.hostname != socket.gethostname():
        return None  # another host or container: its processes cannot be seen from here
    here = runs.boot_id()
    if controller.boot_id and here and controller.boot_id != here:
        return f"{controller.hostname} restarted since the run started"
    try:
        os.kill(controller.pid, 0)
    except ProcessLookupError:
        return f"{who} is gone"
    except PermissionError:
        pass  # exists, as another user
    try:
        started = datetime.fromisoformat(manifest.started_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if runs.process_started_after(controller.pid, started):
        return f"{who} is gone (its pid now belongs to another process)"
    return None


def what_it_left(run_dir: Path) -> str:
    """'stdout.log (12 B), raw/ (3 files, 1.1 MiB)': the run's files besides its manifest and env."""
    parts = []
    for entry in sorted(run_dir.iterdir()):
        if entry.name.startswith(".") or entry.name in ("manifest.json", "env.json"):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                sizes = [p.stat().st_size for p in entry.rglob("*") if p.is_file()]
                parts.append(f"{entry.name}/ ({len(sizes)} files, {runs.human_bytes(sum(sizes))})")
            else:
                parts.append(f"{entry.name} ({runs.human_bytes(entry.lstat().st_size)})")
        except OSError:
            parts.append(entry.name)
    return ", ".join(parts) or "no files besides its manifest"
