"""Facts: what the machine is (the probe's output), never what a service would choose.

Frozen values. The JSON layout is part of the EnvReport contract (docs/contracts.md); `Facts.to_dict` and
`load_typed(Facts, ...)` are its only writer and reader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Verdict:
    """Can something be done here: yes or no, why, and the fix a user can apply."""
    available: bool
    reason: str
    fix: str | None = None
    backend: str | None = None  # the backend that would provide it
    cause: str | None = None  # short machine-readable cause, e.g. "aqlprofile-bare-name"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the probe saw it: its vendor, architecture, name, memory and family, and the tool that listed it."""
    index: int
    vendor: str  # "amd" | "nvidia"
    arch: str | None  # gfx942, gfx1151, sm_90 ...
    name: str | None = None
    memory_bytes: int | None = None
    family: str | None = None  # CDNA3, RDNA3.5, Hopper ... from profiling/gpus.yaml
    source: str = ""
    # AMD: the amdgpu driver's power_dpm_force_performance_level of this GPU (auto, profile_standard,
    # ...; RDNA counters need profile_standard); None where it cannot be read.
    perf_level: str | None = None


@dataclass(frozen=True)
class Tool:
    """A profiler or GPU information tool found on the search path: its path and the version it prints."""
    name: str
    path: str
    version: str | None = None


@dataclass(frozen=True)
class DeviceNode:
    """One device file (/dev/kfd, /dev/dri/renderD*, /dev/nvidia*): whether it exists, whether this user can read and
    write it, and its group."""
    path: str
    exists: bool
    accessible: bool
    gid: int | None = None


@dataclass(frozen=True)
class Devices:
    """The GPU device files profilers need: AMD's /dev/kfd and render nodes, NVIDIA's /dev/nvidia*."""
    kfd: DeviceNode
    render: tuple[DeviceNode, ...] = ()
    nvidia: tuple[DeviceNode, ...] = ()


@dataclass(frozen=True)
class Host:
    """The host the probe ran on: kernel, container, user, capabilities and the settings that gate profiling."""
    hostname: str | None
    kernel: str | None
    in_container: bool
    container_evidence: str | None
    uid: int
    effective_capabilities: tuple[str, ...]
    perf_event_paranoid: int | None
    nvidia_profiling_admin_only: bool | None
    devices: Devices
    groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class Rocm:
    """The ROCm installation found: its version, its root folder and what the version was read from."""
    version: str | None
    root: str | None
    source: str | None


@dataclass(frozen=True)
class Torch:
    """The PyTorch of the workload's interpreter, read without importing it: its version, GPU backend and the HIP or
    CUDA runtime it was built with."""
    version: str | None
    backend: str | None  # "rocm" | "cuda" | "cpu"
    path: str | None = None
    python: str | None = None
    hip: str | None = None  # torch.version.hip: the ROCm (HIP) runtime the wheel was built with and bundles
    cuda: str | None = None  # torch.version.cuda


@dataclass(frozen=True)
class Facts:
    """What the probe found on the machine: host, GPUs, ROCm, tools, PyTorch and the counter checks."""
    host: Host
    gpus: tuple[Gpu, ...]
    rocm: Rocm
    tools: dict[str, Tool]
    torch: Torch
    # Counter checks that backends consult: the static checks per vendor ("amd_devices",
    # "amd_counters", "nvidia_counters"), and the live probe's result with --deep ("live_counters").
    checks: dict[str, Verdict] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    probe_seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION

    @property
    def vendor(self) -> str | None:
        """The vendor of the first GPU: the one a run targets by default."""
        return self.gpus[0].vendor if self.gpus else None

    def first_gpu(self, vendor: str) -> Gpu | None:
        return next((g for g in self.gpus if g.vendor == vendor), None)

    def tool(self, name: str | None) -> Tool | None:
        return self.tools.get(name) if name else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
