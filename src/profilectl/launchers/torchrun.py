"""torchrun and `python -m torch.distributed.run` (and the older torch.distributed.launch): one
agent process that starts the workers; each worker runs the script with the agent's Python and
gets RANK / LOCAL_RANK. A profiler wraps the agent and follows the workers it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from profilectl.launchers.base import OUTSIDE, Launch, Launcher, is_python


class Torchrun(Launcher):
    name = "torchrun"

    def recognise(self, argv: Sequence[str]) -> Launch | None:
        if not argv:
            return None
        if Path(argv[0]).name in self.facts["commands"]:
            start = 1
        elif is_python(argv[0]) and len(argv) > 2 and argv[1] == "-m" and argv[2] in self.facts["modules"]:
            start = 3
        else:
            return None
        program_at, seen = self.split(argv, start)
        no_python = any(flag in seen for flag in self.facts["not_python_flags"])
        return Launch(launcher=self.name, launcher_argv=tuple(argv[:program_at]), program=tuple(argv[program_at:]),
                      python_ranks=not no_python, rank_env=tuple(self.facts["rank_env"]),
                      local_rank_env=tuple(self.facts.get("local_rank_env") or ()), placement=OUTSIDE,
                      ranks=self.ranks(seen))
