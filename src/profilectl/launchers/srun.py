"""srun (SLURM): each task runs the program on its node with SLURM_PROCID; a profiler goes inside,
`srun [options] <profiler> -- <program>`, as rocprofv3's at-scale guidance lays it out."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from profilectl.launchers.base import INSIDE, Launch, Launcher, is_python


class Srun(Launcher):
    name = "srun"

    def recognise(self, argv: Sequence[str]) -> Launch | None:
        if not argv or Path(argv[0]).name not in self.facts["commands"]:
            return None
        program_at, seen = self.split(argv, 1)
        program = tuple(argv[program_at:])
        return Launch(launcher=self.name, launcher_argv=tuple(argv[:program_at]), program=program,
                      python_ranks=is_python(program[0]), rank_env=tuple(self.facts["rank_env"]),
                      placement=INSIDE, ranks=self.ranks(seen))
