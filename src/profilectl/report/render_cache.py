"""Reports already printed once, printed again without reading, analysing or rendering anything.

`report PATH` (table, json, md, html; to stdout) keeps the text it printed, keyed by
everything that text is made of: every file under PATH (name, size, modification time, inode: a
finished run's manifest, summary, env.json, telemetry and raw files; a bare folder's traces),
profilectl's code and data (stamp.py), the format and --top, the path as written and the working
folder (reports name their input), the output's encoding, terminal or not and size, and the
environment the renderers read
(PROFILECTL_*, terminal and colour settings, TZ, locale). What can change without a file changing is
never kept: a run still running or abandoned (its profilectl's liveness), a SLURM job folder (its
ranks' liveness), a bare folder's first report (it says it was not read from the summary cache),
and a folder holding a link to another folder (its files are not walked).
Location: the cache folder (cache_folder.py: the running user's own; an entry of another
user's is never printed)/reports. A cache that cannot be read or written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
from typing import Any, Iterator

from profilectl import cache_folder, stamp

FORMAT = "1"
FORMATS = ("table", "json", "md", "html")
ENVIRONMENT = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
               "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "TZ", "LANG", "LC_ALL", "LC_CTYPE", "HOME")
UNSETTLED = ("running", "abandoned")  # statuses that change without a file changing


class _NotKept(Exception):
    """A folder whose files cannot all be named here (a link to another folder): not kept."""


def _files(path: str, digest: "hashlib._Hash") -> None:
    st = os.stat(path)
    digest.update(f"\0{st.st_mode}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    if not os.path.isdir(path):
        return
    for folder, subfolders, names in os.walk(path):
        if any(os.path.islink(os.path.join(folder, sub)) for sub in subfolders):
            raise _NotKept(folder)  # its files live elsewhere and could change unseen by this walk
        subfolders.sort()
        digest.update(f"\0d\0{os.path.relpath(folder, path)}\0{len(subfolders)}".encode())
        for name in sorted(names):
            try:
                entry = os.stat(os.path.join(folder, name))
            except OSError:
                entry = None
            sig = f"{entry.st_ino}:{entry.st_size}:{entry.st_mtime_ns}" if entry else "-"
            digest.update(f"\0{name}\0{sig}".encode())


def key(path: str, fmt: str, top: int) -> str | None:
    """The cache key of this report, or None where its text may not be kept (a table on a terminal
    follows the terminal's width; a path that cannot be read is left to the reader's own error)."""
    if fmt not in FORMATS:
        return None
    digest = hashlib.sha256(f"{FORMAT}\0{stamp.code_and_data()}\0{fmt}\0{top}\0{path}".encode())
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        return None
    if terminal:  # a table follows the terminal's size (and colours: the environment below)
        try:
            size = os.get_terminal_size(sys.stdout.fileno())
        except (OSError, AttributeError, ValueError):
            return None
        digest.update(f"\0tty\0{size.columns}x{size.lines}".encode())
    try:
        digest.update(f"\0{os.path.realpath(path)}\0{os.getcwd()}".encode())
        _files(path, digest)
    except (OSError, _NotKept):
        return None
    shown = {k: v for k, v in os.environ.items() if k.startswith("PROFILECTL_") or k in ENVIRONMENT}
    digest.update("\0".join(f"{k}={shown[k]}" for k in sorted(shown)).encode())
    digest.update(f"\0{getattr(sys.stdout, 'encoding', None)}".encode())
    return digest.hexdigest()[:40]


def serve(cache_key: str) -> bool:
    """Print a kept report (one of the running user's own: cache_folder.read); False when there is none."""
    text = cache_folder.read_text("reports", f"{cache_key}.txt")
    if text is None:
        return False
    sys.stdout.write(text)
    return True


def settled(summary: Any) -> bool:
    """Whether the report of this summary is the same next time its files are the same."""
    run = getattr(summary, "run", None)
    if getattr(summary, "job", None) is not None or (run is not None and run.status in UNSETTLED):
        return False
    source = getattr(summary, "source", None)
    if source is not None and source.kind not in ("profilectl-run",):
        return bool(getattr(summary, "cache_hit", False))  # a bare folder's first report says "not cached"
    return True


def keep(cache_key: str, text: str) -> None:
    cache_folder.keep("reports", f"{cache_key}.txt", text)


class _Captured(io.StringIO):
    """stdout while a report is rendered: what is written is kept, and the renderers see the real
    stdout's encoding, terminal or not, and size (its file descriptor), so they write the same text."""

    def __init__(self, like: Any) -> None:
        super().__init__()
        self._like = like

    @property
    def encoding(self) -> Any:  # type: ignore[override]
        return getattr(self._like, "encoding", None)

    def isatty(self) -> bool:
        return bool(self._like.isatty())

    def fileno(self) -> int:
        fileno: int = self._like.fileno()
        return fileno


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """Everything written to stdout inside goes to the returned buffer, and then to stdout (also when
    rendering fails half-way: what was printed stays printed)."""
    real = sys.stdout
    buffer = _Captured(real)
    sys.stdout = buffer
    try:
        yield buffer
    finally:
        sys.stdout = real
        real.write(buffer.getvalue())
