"""Summaries of bare output directories, cached outside the user's files.

Key: profilectl's code, the resolved path and the (name, size, mtime) of every input file, so a
changed, added or removed file, or another profilectl, invalidates the entry. Location: $PROFILECTL_CACHE_DIR, else $XDG_CACHE_HOME/profilectl,
else ~/.cache/profilectl. A cache that cannot be read or written is skipped: it only saves time.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Callable

from profilectl import __version__
from profilectl.cache_folder import cache_dir
from profilectl.errors import FormatError
from profilectl.report.summary import Summary

KEY_VERSION = "2"  # bumped when the summary layout changes, so old entries are not read


@functools.lru_cache(maxsize=1)
def code_stamp() -> str:
    """profilectl's own code as it is now (sizes and times of its modules): a summary made by other
    code, an upgrade or an edited checkout, is not read back (~70 stat calls, once per process)."""
    package = Path(__file__).resolve().parents[1]
    stamp = hashlib.sha256(__version__.encode())
    for module in sorted(package.rglob("*.py")):
        st = module.stat()
        stamp.update(f"\0{module.relative_to(package)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return stamp.hexdigest()[:16]


def key(path: Path, files: list[Path]) -> str:
    digest = hashlib.sha256(f"{KEY_VERSION}\0{code_stamp()}\0{path.resolve()}".encode())
    for file in sorted(files):
        st = file.stat()
        digest.update(f"\0{file.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def cached(path: Path, files: list[Path], compute: Callable[[], Summary]) -> tuple[Summary, bool]:
    """(summary, hit)."""
    entry = cache_dir() / "summaries" / f"{key(path, files)}.json"
    if entry.is_file():
        try:
            return Summary.read(entry), True
        except FormatError:
            pass  # an entry from another version or a torn write: recompute
    summary = compute()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        summary.write(entry)
    except OSError:
        pass
    return summary, False
