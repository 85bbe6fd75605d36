"""EnvReport: the probe's answer, written as env.json and printed by `env-check --json`.

The JSON keys are a stable contract (documented in README.md); bump SCHEMA_VERSION on any change
that removes or renames a key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass
class Verdict:
    available: bool
    reason: str
    fix: str | None = None
    backend: str | None = None  # the backend that would provide it
    cause: str | None = None  # short machine-readable cause, e.g. "aqlprofile-bare-name"


@dataclass
class Gpu:
    index: int
    vendor: str  # "amd" | "nvidia"
    arch: str | None  # gfx942, gfx1151, sm_90 ...
    name: str | None = None
    memory_bytes: int | None = None
    family: str | None = None  # CDNA3, RDNA3.5, Hopper ... from profiling/gpus.yaml
    source: str = ""


@dataclass
class Tool:
    name: str
    path: str
    version: str | None = None


@dataclass
class Host:
    hostname: str | None
    kernel: str | None
    in_container: bool
    container_evidence: str | None
    uid: int
    effective_capabilities: list[str]
    perf_event_paranoid: int | None
    nvidia_profiling_admin_only: bool | None
    devices: dict[str, Any]
    groups: list[int]


@dataclass
class Rocm:
    version: str | None
    root: str | None
    source: str | None


@dataclass
class Torch:
    version: str | None
    backend: str | None  # "rocm" | "cuda" | "cpu"
    path: str | None = None
    python: str | None = None


@dataclass
class ServiceChoice:
    backend: str | None
    reason: str
    fallbacks: list[dict[str, str]] = field(default_factory=list)


@dataclass
class EnvReport:
    host: Host
    gpus: list[Gpu]
    rocm: Rocm
    tools: dict[str, Tool]
    torch: Torch
    capabilities: dict[str, Verdict]
    services: dict[str, ServiceChoice] = field(default_factory=dict)
    # Facts that backends consult: the static counter checks per vendor ("amd_counters",
    # "nvidia_counters"), and the live probe's result when --deep ran ("live_counters").
    checks: dict[str, Verdict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    probe_seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION

    @property
    def vendor(self) -> str | None:
        """The vendor of the first GPU: the one a run targets by default."""
        return self.gpus[0].vendor if self.gpus else None

    def first_gpu(self, vendor: str) -> Gpu | None:
        return next((g for g in self.gpus if g.vendor == vendor), None)

    def tool(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
