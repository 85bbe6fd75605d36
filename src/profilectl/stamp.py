"""What profilectl's answers are made of besides their input: its code and its data files.

A stamp of both (path, size and modification time of every module and every file under the data
folders in use) is part of every cache key that stores a computed answer (the env-check assessment,
rendered reports), so an upgrade, an edited checkout or a changed counter set never reads an answer
made by other code or other data. Imports nothing heavy: it runs before the cache is even looked at.
"""

from __future__ import annotations

import functools
import hashlib
import os

from profilectl import __version__, settings

PACKAGE = os.path.dirname(os.path.abspath(__file__))
OVERRIDE_ENV = "PROFILECTL_PROFILING_DIR"  # data.OVERRIDE_ENV (data imports yaml, so not imported here)


def _walk(top: str, digest: "hashlib._Hash", suffixes: tuple[str, ...] | None) -> None:
    for folder, subfolders, names in os.walk(top):
        subfolders.sort()
        subfolders[:] = [s for s in subfolders if s != "__pycache__"]
        for name in sorted(names):
            if suffixes is not None and not name.endswith(suffixes):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            digest.update(f"\0{os.path.relpath(path, top)}\0{st.st_size}\0{st.st_mtime_ns}".encode())


def _data_folders() -> list[str]:
    checkout = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "profiling")
    override = settings.get_path(OVERRIDE_ENV)
    folders = [str(override or ""), checkout, os.path.join(PACKAGE, "profiling")]
    return [f for f in folders if f and os.path.isdir(f)]


@functools.lru_cache(maxsize=1)
def code_and_data() -> str:
    digest = hashlib.sha256(__version__.encode())
    _walk(PACKAGE, digest, (".py",))
    for folder in _data_folders():
        digest.update(f"\0\0{os.path.abspath(folder)}".encode())
        _walk(folder, digest, None)
    return digest.hexdigest()[:24]
