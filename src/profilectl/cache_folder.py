"""Where profilectl keeps answers it can compute again (probe answers, counter listings, assessments,
summaries, printed reports), and how an entry is written.

The folder: $PROFILECTL_CACHE_DIR, else $XDG_CACHE_HOME/profilectl, else ~/.cache/profilectl. An
entry is written under a temporary name and renamed, so a reader never sees half of one; a cache
that cannot be written is skipped (it only saves time). Imports nothing heavy: the probe and
`report` look here before anything else.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("PROFILECTL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "profilectl"


def keep(entry: Path, text: str) -> None:
    """Write a cache entry whole (temporary name, then rename), or not at all."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, entry)
    except OSError:
        pass
