"""The diagnosis's rules and thresholds, read once from profiling/verdicts.yaml into a typed value:
what explains a GPU idle gap, which verdict each cause gives, and every threshold a verdict uses
(each with its reason in the file). The only place the file is read."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CauseRule:
    """One cause of GPU idle time (profiling/verdicts.yaml): how a gap is matched to it, its verdict and next step."""
    key: str
    title: str
    rule: str  # ends-at-gap, covers, short-gap, operator, rest
    pattern: "re.Pattern[str] | None"
    reason: str
    verdict: str
    next_step: str
    by_program: tuple[tuple[str, str], ...] = ()  # (program, next_step) where the advice depends on it

    def next_step_for(self, program: str) -> str:
        """The advice for a program of this kind (RankTimeline.program), else the general one."""
        return dict(self.by_program).get(program, self.next_step)


@dataclass(frozen=True)
class Rules:
    """profiling/verdicts.yaml as read once: the thresholds, the causes of idle time and the ranges that frame steps."""
    thresholds: dict[str, Any]
    causes: tuple[CauseRule, ...]
    frames: "re.Pattern[str]"  # host ranges that frame whole steps or phases: they name no gap

    def __getitem__(self, name: str) -> Any:
        return self.thresholds[name]

    def cause(self, key: str) -> CauseRule:
        return next(c for c in self.causes if c.key == key)


@functools.lru_cache(maxsize=None)
def rules() -> Rules:
    from profilectl.data import load_mapping
    from profilectl.errors import DataError
    doc = load_mapping("verdicts.yaml")
    try:
        causes = tuple(CauseRule(key=c["key"], title=c["title"], rule=c["rule"],
                                 pattern=re.compile("|".join(f"(?:{n})" for n in c["names"]), re.IGNORECASE)
                                 if c.get("names") else None,
                                 reason=" ".join(str(c["reason"]).split()), verdict=c["verdict"],
                                 next_step=" ".join(str(c["next_step"]).split()),
                                 by_program=tuple((str(k), " ".join(str(v).split()))
                                                  for k, v in (c.get("next_step_by_program") or {}).items()))
                       for c in doc["causes"])
        thresholds = dict(doc["thresholds"])
        frames = re.compile("|".join(f"(?:{n})" for n in doc["frames"]["names"]))
    except (KeyError, TypeError, re.error) as exc:
        raise DataError(f"profiling/verdicts.yaml: a rule is incomplete or invalid ({exc})") from None
    return Rules(thresholds=thresholds, causes=causes, frames=frames)
