"""Summaries of bare output directories, cached outside the user's files.

Key: profilectl's code and data files (stamp.py), the resolved path and the (name, size, mtime) of
every input file, so a changed, added or removed file, another profilectl or an edited counter set
or rule invalidates the entry. Location: the cache folder (cache_folder.py)/summaries. A cache that
cannot be read or written is skipped: it only saves time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from profilectl import cache_folder, stamp
from profilectl.errors import FormatError
from profilectl.read.summary import Summary

KEY_VERSION = "2"  # bumped when the summary layout changes, so old entries are not read


def key(path: Path, files: list[Path]) -> str:
    digest = hashlib.sha256(f"{KEY_VERSION}\0{stamp.code_and_data()}\0{path.resolve()}".encode())
    for file in sorted(files):
        st = file.stat()
        digest.update(f"\0{file.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def cached(path: Path, files: list[Path], compute: Callable[[], Summary]) -> tuple[Summary, bool]:
    """(summary, hit)."""
    entry = f"{key(path, files)}.json"
    data = cache_folder.read("summaries", entry)
    if data is not None:
        try:
            return Summary.decode(data, f"cached summary {entry}"), True
        except FormatError:
            pass  # an entry from another version or a torn write: recompute
    summary = compute()
    cache_folder.keep("summaries", entry, summary.encode())
    return summary, False
