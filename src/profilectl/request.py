"""What the user asked for: the service, the workload and the options, before any planning."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from profilectl import data
from profilectl.errors import UsageError

SERVICES = ("profile", "counters", "trace")
WORKLOAD_ENV = "PROFILECTL_WORKLOAD"


@dataclass(frozen=True)
class Request:
    service: str
    workload: tuple[str, ...]
    workload_source: str = "argument"  # argument | environment | default
    backend: str | None = None  # forced with --backend
    counter_set: str = "basic"
    preset: str = "lightweight"
    fallback: bool = False
    timeout_s: float | None = None
    serialize: bool = False
    repeat: int = 5
    warmup: int = 1
    env_overrides: dict[str, str] = field(default_factory=dict)

    @property
    def is_python(self) -> bool:
        return bool(self.workload) and Path(self.workload[0]).name.startswith("python")


def hip_workload() -> str | None:
    """The HIP matmul the image builds with hipcc (docker/Dockerfile), if this is such an image."""
    candidate = Path(os.environ.get("PROFILECTL_HOME", "/opt/profilectl")) / "bin" / "hip_matmul"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def default_workload(prefer_hip: bool = False) -> tuple[str, ...]:
    """The built-in workload: the HIP binary on an AMD GPU without ROCm PyTorch, else matmul.py."""
    hip = hip_workload() if prefer_hip else None
    if hip:
        return (hip,)
    return ("python3", str(data.require("workloads/matmul.py")))


def resolve_workload(argv: list[str] | tuple[str, ...], prefer_hip: bool = False) -> tuple[tuple[str, ...], str]:
    """The workload argv: after `--` on the command line, else $PROFILECTL_WORKLOAD, else built-in."""
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv:
        return tuple(argv), "argument"
    from_env = os.environ.get(WORKLOAD_ENV, "").strip()
    if from_env:
        try:
            return tuple(shlex.split(from_env)), "environment"
        except ValueError as exc:
            raise UsageError(f"${WORKLOAD_ENV} is not a valid command line: {exc}") from None
    return default_workload(prefer_hip), "default"


def parse_env_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out
