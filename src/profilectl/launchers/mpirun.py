"""mpirun / mpiexec (Open MPI, MPICH/Hydra): each rank runs the program; a profiler goes inside,
before each rank's program, so every rank has its own profiler and its own output."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from profilectl.launchers.base import INSIDE, Launch, Launcher, is_python


class Mpirun(Launcher):
    name = "mpirun"

    def recognise(self, argv: Sequence[str]) -> Launch | None:
        if not argv or Path(argv[0]).name not in self.facts["commands"]:
            return None
        program_at, seen = self.split(argv, 1)
        program = tuple(argv[program_at:])
        return Launch(launcher=self.name, launcher_argv=tuple(argv[:program_at]), program=program,
                      python_ranks=is_python(program[0]), rank_env=tuple(self.facts["rank_env"]),
                      placement=INSIDE, ranks=self.ranks(seen))
