"""The launcher interface: find the program each rank runs inside a launcher's command line, and
place a profiler where that launcher needs it. Adding a launcher is adding one module (and its
entry in profiling/launchers.yaml)."""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

from profilectl import data
from profilectl.errors import UsageError

OUTSIDE, INSIDE, NONE = "outside", "inside", "none"


@dataclass(frozen=True)
class Launch:
    """A workload as its launcher runs it."""
    launcher: str  # "plain", "torchrun", "mpirun", "srun"
    launcher_argv: tuple[str, ...]  # the launcher and its options; empty for a plain program
    program: tuple[str, ...]  # what each rank runs (for torchrun: the script and its arguments)
    python_ranks: bool  # the ranks are Python interpreters (torch.profiler can be started in them)
    rank_env: tuple[str, ...] = ()  # environment variables that carry a rank's number, first set wins
    local_rank_env: tuple[str, ...] = ()  # those that carry its number on its node (which GPU it most likely uses)
    placement: str = NONE  # where a profiler goes: OUTSIDE the launcher, INSIDE (per rank), NONE
    ranks: int | None = None  # ranks on this node when the command line says (--nproc_per_node, -np)

    @property
    def argv(self) -> tuple[str, ...]:
        return self.launcher_argv + self.program

    @property
    def multi_rank(self) -> bool:
        return self.launcher != "plain"

    def wrap(self, profiler: Sequence[str]) -> tuple[str, ...]:
        """The whole command with the profiler's own argv (ending in `--` where it wants one)
        placed where this launcher needs it: around the launcher, or inside it before each rank's
        program."""
        if self.placement == INSIDE:
            return self.launcher_argv + tuple(profiler) + self.program
        return tuple(profiler) + self.argv


@dataclass(frozen=True)
class ExitedRank:
    """A rank the launcher's output reports as failed: its rank, and its exit code and host where given."""
    rank: str
    exit_code: int | None
    host: str | None = None

    def __str__(self) -> str:
        where = f" on {self.host}" if self.host else ""
        code = f"exit code {self.exit_code}" if self.exit_code is not None else "failed"
        return f"rank {self.rank}{where} ({code})"


@functools.lru_cache(maxsize=None)
def launcher_facts() -> dict[str, Any]:
    return data.load_mapping("launchers.yaml")


def is_python(program: str) -> bool:
    return bool(re.fullmatch(r"python[0-9.]*", Path(program).name))


class Launcher(ABC):
    name: ClassVar[str]

    @property
    def facts(self) -> dict[str, Any]:
        return launcher_facts()[self.name]

    @abstractmethod
    def recognise(self, argv: Sequence[str]) -> Launch | None:
        """This launcher's reading of the command, or None when the command is not its own."""

    def split(self, argv: Sequence[str], start: int) -> tuple[int, dict[str, str]]:
        """Walk the launcher's options from argv[start]: (index of the program, options seen).
        A launcher with no program after its options is a usage error."""
        values = set(self.facts.get("value_options") or ())
        pairs = set(self.facts.get("two_value_options") or ())
        seen: dict[str, str] = {}
        i = start
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            option, eq, attached = argv[i].partition("=")
            if argv[i] == "--":
                i += 1
                break
            if option in pairs and not eq:
                seen[option] = " ".join(argv[i + 1:i + 3])
                i += 3
            elif option in values and not eq:
                seen[option] = argv[i + 1] if i + 1 < len(argv) else ""
                i += 2
            else:
                seen[option] = attached
                i += 1
        if i >= len(argv):
            raise UsageError(f"{Path(argv[0]).name} with no program after it: put the program each rank runs "
                             f"after the launcher's options (e.g. {Path(argv[0]).name} ... python3 train.py)")
        return i, seen

    def ranks(self, seen: dict[str, str]) -> int | None:
        for option in self.facts.get("ranks_option") or ():
            value = seen.get(option, "")
            if value.isdigit():
                return int(value)
        return None

    def fatal(self, text: str) -> str | None:
        """The launcher's own last fatal error in its output (not a rank's), when it printed one."""
        pattern = self.facts.get("fatal")
        found = re.findall(pattern, text, re.MULTILINE) if pattern else []
        return found[-1].strip() if found else None

    def failed_ranks(self, text: str) -> list[ExitedRank]:
        """The ranks the launcher reported as failed, from its output."""
        pattern = self.facts.get("failure")
        if not pattern:
            return []
        found = []
        for match in re.finditer(pattern, text):
            groups = match.groupdict()
            code = groups.get("code")
            found.append(ExitedRank(rank=groups["rank"], exit_code=int(code) if code else None,
                                     host=groups.get("host")))
        return list({(f.rank, f.host): f for f in found}.values())


class EachRankRunsTheProgram(Launcher):
    """A launcher whose every rank runs the program itself (mpirun, srun): the profiler goes
    inside, before each rank's program, so every rank has its own profiler and output."""

    def recognise(self, argv: Sequence[str]) -> Launch | None:
        if not argv or Path(argv[0]).name not in self.facts["commands"]:
            return None
        program_at, seen = self.split(argv, 1)
        program = tuple(argv[program_at:])
        return Launch(launcher=self.name, launcher_argv=tuple(argv[:program_at]), program=program,
                      python_ranks=is_python(program[0]), rank_env=tuple(self.facts["rank_env"]),
                      local_rank_env=tuple(self.facts.get("local_rank_env") or ()), placement=INSIDE,
                      ranks=self.ranks(seen))
