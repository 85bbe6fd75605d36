"""A program started directly: one process, the rank of a job only if something around profilectl
(an srun running profilectl itself) made it one."""

from __future__ import annotations

from typing import Sequence

from profilectl.launchers.base import NONE, Launch, Launcher, is_python

# Rank variables a process inherits when profilectl itself runs as one rank of a job.
INHERITED_RANK_ENV = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


class Plain(Launcher):
    name = "plain"

    @property
    def facts(self) -> dict:  # no launcher options to read
        return {}

    def recognise(self, argv: Sequence[str]) -> Launch:
        return Launch(launcher=self.name, launcher_argv=(), program=tuple(argv),
                      python_ranks=bool(argv) and is_python(argv[0]), rank_env=INHERITED_RANK_ENV, placement=NONE)
