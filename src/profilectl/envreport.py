"""EnvReport: the machine's Facts and what each capability and service would do with them.

This is `env-check --json` and every run's env.json. The key layout is a stable contract
(docs/contracts.md); bump facts.SCHEMA_VERSION when a key is removed or renamed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilectl.facts import SCHEMA_VERSION, Facts, Verdict
from profilectl.files import load_typed, read_json


@dataclass(frozen=True)
class Fallback:
    """A backend that was passed over, and why."""
    backend: str
    reason: str
    fix: str | None = None
    cause: str | None = None


@dataclass(frozen=True)
class ServiceChoice:
    """The backend a service would use on this machine (None: none is available), why, and the backends passed over."""
    backend: str | None
    reason: str
    fallbacks: tuple[Fallback, ...] = ()


@dataclass(frozen=True)
class Assessment:
    """What env-check concludes from the facts: each capability's verdict and the backend each service would choose."""
    capabilities: dict[str, Verdict] = field(default_factory=dict)
    services: dict[str, ServiceChoice] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvReport:
    """env-check's answer and each run's env.json: the machine's Facts and the Assessment made from them."""
    facts: Facts
    assessment: Assessment

    def to_dict(self) -> dict[str, Any]:
        facts = self.facts.to_dict()
        ordered = {key: facts[key] for key in ("schema_version", "host", "gpus", "rocm", "tools", "torch")}
        ordered.update(dataclasses.asdict(self.assessment))
        ordered.update({key: facts[key] for key in ("checks", "notes", "probe_seconds")})
        return ordered

    @classmethod
    def from_dict(cls, data: Any, source: str | Path) -> "EnvReport":
        facts = load_typed(Facts, data, source, "env report")
        if facts.schema_version != SCHEMA_VERSION:
            from profilectl.errors import FormatError
            raise FormatError(f"{source}: env report schema {facts.schema_version}, this profilectl reads "
                              f"{SCHEMA_VERSION}")
        return cls(facts, load_typed(Assessment, data, source, "env report"))

    @classmethod
    def read(cls, path: Path) -> "EnvReport":
        return cls.from_dict(read_json(path), path)
