"""Probe answers that only change when files change, kept so env-check does not start the same
programs again: a tool's `--version` and the workload Python's PyTorch.

Every entry names the files its answer came from (witnesses) with their identity (device, inode,
size, modification and change times); an entry is used only while every witness is as it was, so
an upgraded tool, a reinstalled or newly installed torch, another Python chosen by a shim (pyenv's
version files) or another sys.path reads afresh. Location: the cache folder
(cache_folder.py: the running user's own)/probe. A cache that cannot be read or
written is skipped: it only saves time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from profilectl import cache_folder


FORMAT = "1"  # bumped when an entry's layout or what it stands for changes
T = TypeVar("T")


def identity(path: str) -> str:
    """A file's identity as stat sees it, following links; `-` for a missing one."""
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_mode}"


def _entry(kind: str, key_parts: Iterable[str]) -> str:
    digest = hashlib.sha256("\0".join([FORMAT, kind, *key_parts]).encode()).hexdigest()[:32]
    return f"{kind}-{digest}.json"


def remembered(kind: str, key_parts: list[str], compute: Callable[[], tuple[T, list[str] | None]],
               encode: Callable[[T], Any], decode: Callable[[Any], T]) -> T:
    """compute() -> (answer, witness paths, or None for an answer not to keep); the answer of an
    entry whose witnesses are all unchanged, else compute's (kept for next time)."""
    entry = _entry(kind, key_parts)
    try:
        saved = json.loads(cache_folder.read("probe", entry) or b"null")
        witnesses = saved["witnesses"]
        if all(identity(path) == seen for path, seen in witnesses.items()):
            return decode(saved["answer"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        pass
    answer, paths = compute()
    if not paths:
        return answer
    cache_folder.keep("probe", entry, json.dumps({"answer": encode(answer), "witnesses": {p: identity(p) for p in paths}}))
    return answer


def _real(path: str) -> str:
    return os.path.realpath(path)


def tool_version_witnesses(path: str, root: Path) -> list[str]:
    """A tool's version is its file's (and, for nvidia-smi and the like, the loaded driver's)."""
    return [path, _real(path), str(root / "proc/driver/nvidia/version"), str(root / "opt/rocm/.info/version")]


def shim_witnesses(python: str, cwd: str, env: dict[str, str] | Any) -> list[str]:
    """A `python3` that is a script (pyenv, asdf shims) picks the interpreter from version files
    found from the working folder up and in its root: each folder (a version file created there
    changes it) and each such file."""
    try:
        with open(python, "rb") as fh:
            if fh.read(2) != b"#!":
                return []
    except OSError:
        return []
    found = []
    folder = Path(cwd)
    for place in (folder, *folder.parents):
        found += [str(place), str(place / ".python-version"), str(place / ".tool-versions")]
    pyenv_root = env.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found += [pyenv_root, str(Path(pyenv_root) / "version")]
    return found


def env_key(env: dict[str, str] | Any) -> list[str]:
    """The environment a Python's module search depends on (and a shim's choice of Python)."""
    prefixes = ("PYTHON", "PYENV", "VIRTUAL_ENV", "CONDA", "ASDF")
    return [f"{k}={env[k]}" for k in sorted(env) if k.startswith(prefixes)]


def nvidia_gpu_key(machine: Any, smi: str) -> list[str]:
    """What nvidia-smi's GPU list follows, read afresh every time: the GPUs the driver has (its
    /proc entries, one per PCI address), the device nodes this process was granted (containers), the
    loaded driver, this boot (a GPU swapped needs a reboot) and the visibility variables; nvidia-smi
    itself and the search PATH. A GPU added or removed, another driver or container: another key."""
    def listing(absolute: str, prefix: str = "") -> str:
        try:
            return ",".join(sorted(n for n in os.listdir(machine.file(absolute)) if n.startswith(prefix)))
        except OSError:
            return "-"
    return [smi, machine.path, listing("/proc/driver/nvidia/gpus"), listing("/dev", "nvidia"),
            machine.read("/proc/driver/nvidia/version") or "-", machine.read("/proc/sys/kernel/random/boot_id") or "-",
            *(f"{k}={machine.env.get(k, '')}" for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"))]
