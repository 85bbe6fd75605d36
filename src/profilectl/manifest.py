"""manifest.json: what a run was and how it ended, written at start (status `running`) and
rewritten atomically at the end, so a killed run still says what it was.

The Manifest type is the file's only writer and reader (`load_typed` checks every field), so a
manifest that is not one (a JSON list, a number where a time belongs) is one clear line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profilectl.countersets import CounterPlan
from profilectl.envreport import Fallback
from profilectl.facts import Gpu, Tool
from profilectl.files import read_typed, write_json_atomic

MANIFEST_SCHEMA = 1
STATUSES = ("running", "ok", "failed", "timeout", "interrupted", "no-output", "disk-full")


@dataclass(frozen=True)
class PhaseRecord:
    """One phase of a run as manifest.json keeps it: its backend, raw folder, environment and its steps' commands."""
    backend: str
    raw_dir: str
    environment: dict[str, str]
    argv: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class StepRecord:
    """One step of a run as manifest.json keeps it: its label, exit code and seconds."""
    label: str
    exit_code: int | None
    seconds: float


@dataclass(frozen=True)
class OutputFile:
    """One file of a run folder as manifest.json lists it: its path in the folder and its size in bytes."""
    path: str
    bytes: int


@dataclass(frozen=True)
class Controller:
    """The profilectl process that owns the run: lets `ls` tell a live run from an abandoned one."""
    pid: int
    hostname: str
    boot_id: str | None = None


@dataclass(frozen=True)
class Manifest:
    """manifest.json: what a run was (service, backend and why, commands, workload, GPU) and how it ended."""
    schema_version: int
    profilectl_version: str
    service: str
    backend: str
    reason: str
    fallbacks: tuple[Fallback, ...]
    tool: Tool | None
    argv: tuple[str, ...]
    phases: tuple[PhaseRecord, ...]
    workload: tuple[str, ...]
    workload_source: str
    counter_set: CounterPlan | None
    gpu: Gpu | None
    started_at: str
    finished_at: str | None = None
    wall_seconds: float | None = None
    exit_code: int | None = None
    status: str = "running"
    message: str | None = None
    steps: tuple[StepRecord, ...] = ()
    perfetto_trace: str | None = None
    notes: tuple[str, ...] = ()
    outputs: tuple[OutputFile, ...] = ()
    controller: Controller | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write(self, run_dir: Path) -> None:
        write_json_atomic(run_dir / "manifest.json", self.to_dict())

    @classmethod
    def read(cls, run_dir: Path) -> "Manifest":
        manifest = read_typed(cls, run_dir / "manifest.json", "profilectl manifest")
        if manifest.status not in STATUSES:
            from profilectl.errors import FormatError
            raise FormatError(f"{run_dir / 'manifest.json'}: not a valid profilectl manifest: unknown status "
                              f"{manifest.status!r}")
        return manifest
