"""Summaries of bare output directories, cached outside the user's files.

Key: the resolved path and the (name, size, mtime) of every input file, so a changed, added or
removed file invalidates the entry. Location: $PROFILECTL_CACHE_DIR, else $XDG_CACHE_HOME/profilectl,
else ~/.cache/profilectl. A cache that cannot be written is skipped silently: it only saves time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from profilectl.runs import write_json_atomic


def cache_dir() -> Path:
    explicit = os.environ.get("PROFILECTL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "profilectl"


def key(path: Path, files: list[Path]) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode())
    for file in sorted(files):
        st = file.stat()
        digest.update(f"\0{file.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def cached(path: Path, files: list[Path], compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """(summary, hit)."""
    entry = cache_dir() / "summaries" / f"{key(path, files)}.json"
    try:
        return json.loads(entry.read_text()), True
    except (OSError, ValueError):
        pass
    summary = compute()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(entry, summary, indent=None)  # machine-read only: compact is faster
    except OSError:
        pass
    return summary, False
