"""Locating and loading the data files under profiling/ (GPU facts, counter sets, workloads).

Lookup order: $PROFILECTL_PROFILING_DIR (the container mounts the host's profiling/ there, so users
can add counter sets), then the profiling/ folder shipped beside the package.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import yaml

from profilectl.errors import UsageError

_SHIPPED = Path(__file__).resolve().parents[2] / "profiling"


def profiling_dirs() -> list[Path]:
    dirs = []
    override = os.environ.get("PROFILECTL_PROFILING_DIR")
    if override:
        dirs.append(Path(override))
    for candidate in (_SHIPPED, Path(os.environ.get("PROFILECTL_HOME", "/opt/profilectl")) / "profiling"):
        if candidate not in dirs:
            dirs.append(candidate)
    return [d for d in dirs if d.is_dir()]


def find(relative: str) -> Path | None:
    for base in profiling_dirs():
        candidate = base / relative
        if candidate.exists():
            return candidate
    return None


def load_yaml(path: Path) -> Any:
    try:
        with open(path) as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None


@functools.lru_cache(maxsize=None)
def gpu_facts() -> dict[str, dict[str, dict[str, Any]]]:
    path = find("gpus.yaml")
    if path is None:
        return {"amd": {}, "nvidia": {}}
    data = load_yaml(path) or {}
    return {"amd": data.get("amd", {}) or {}, "nvidia": data.get("nvidia", {}) or {}}


def arch_facts(vendor: str | None, arch: str | None) -> dict[str, Any]:
    if not vendor or not arch:
        return {}
    return gpu_facts().get(vendor, {}).get(arch, {})
