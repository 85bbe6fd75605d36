"""profilectl's data files (profiling/: GPU facts, counter sets, tool facts, built-in workloads).

Layers, first match wins:
1. $PROFILECTL_PROFILING_DIR: the user's own folder (the compose suite mounts the host's
   profiling/ there, so users add counter sets without rebuilding anything);
2. the data shipped with profilectl: the checkout's top-level profiling/ when running from a
   source tree (tools/profilectl, editable installs), else the copy inside the installed package
   (profilectl/profiling, package data of the wheel, read through importlib.resources).
A missing shipped folder is an installation error (DataError), never an empty table.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from profilectl import settings
from profilectl.errors import DataError, UsageError

OVERRIDE_ENV = "PROFILECTL_PROFILING_DIR"
_CHECKOUT = Path(__file__).resolve().parents[2] / "profiling"
_MARKER = "gpus.yaml"  # every complete data folder has it


@functools.lru_cache(maxsize=None)
def shipped_dir() -> Path:
    """The data that came with this profilectl (checkout or wheel)."""
    if (_CHECKOUT / _MARKER).is_file():
        return _CHECKOUT
    from importlib.resources import files
    packaged = Path(str(files("profilectl").joinpath("profiling")))
    if (packaged / _MARKER).is_file():
        return packaged
    raise DataError(f"profilectl's data folder is missing from this installation (looked for {_CHECKOUT} and "
                    f"{packaged}): reinstall profilectl, or set ${OVERRIDE_ENV} to a copy of its profiling/ folder")


def profiling_dirs() -> list[Path]:
    dirs = []
    override = settings.get_path(OVERRIDE_ENV)
    if override is not None:
        if not override.is_dir():
            raise UsageError(f"${OVERRIDE_ENV}={override} is not a folder")
        dirs.append(override)
    shipped = shipped_dir()
    if shipped not in dirs:
        dirs.append(shipped)
    return dirs


def find(relative: str) -> Path | None:
    for base in profiling_dirs():
        candidate = base / relative
        if candidate.exists():
            return candidate
    return None


def require(relative: str) -> Path:
    """A data file profilectl cannot work without."""
    found = find(relative)
    if found is None:
        raise DataError(f"profilectl's data file profiling/{relative} is missing (searched "
                        f"{', '.join(map(str, profiling_dirs()))}): reinstall profilectl")
    return found


def load_yaml(path: Path) -> Any:
    # PyYAML imported here: the commands that read no data file (env-check on a machine without a
    # GPU, a kept report) do not pay for it. libyaml's safe loader where PyYAML was built with it
    # (PyPI wheels and Debian's are): the same documents ~8x faster than the pure-Python one.
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, "rb") as fh:
            return yaml.load(fh, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder, not a YAML file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None


def load_mapping(relative: str) -> dict[str, Any]:
    """A required YAML data file whose top level is a mapping."""
    path = require(relative)
    doc = load_yaml(path)
    if not isinstance(doc, dict):
        raise DataError(f"{path}: expected a YAML mapping at the top level")
    return doc


@functools.lru_cache(maxsize=None)
def gpu_facts() -> dict[str, dict[str, dict[str, Any]]]:
    doc = load_mapping("gpus.yaml")
    return {"amd": doc.get("amd") or {}, "nvidia": doc.get("nvidia") or {}}


def arch_facts(vendor: str | None, arch: str | None) -> dict[str, Any]:
    if not vendor or not arch:
        return {}
    return gpu_facts().get(vendor, {}).get(arch, {})
