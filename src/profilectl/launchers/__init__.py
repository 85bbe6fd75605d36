"""Launchers, by name: the first that recognises a workload's command line reads it; a plain
program is the fallback."""

from __future__ import annotations

import shutil
from typing import Sequence

from profilectl.launchers.base import Launch, Launcher, ExitedRank, is_python
from profilectl.launchers.mpirun import Mpirun
from profilectl.launchers.plain import Plain
from profilectl.launchers.srun import Srun
from profilectl.launchers.torchrun import Torchrun

LAUNCHERS: dict[str, Launcher] = {launcher.name: launcher for launcher in (Torchrun(), Mpirun(), Srun(), Plain())}


def interpreter(launch: Launch) -> str | None:
    """The Python interpreter the ranks run, when they are Python: the program's own `python3`, the
    `python -m torch.distributed.run` interpreter, or torchrun's shebang."""
    if not launch.python_ranks:
        return None
    if launch.launcher == "torchrun":
        first = launch.launcher_argv[0]
        if is_python(first):
            return shutil.which(first) or first
        script = shutil.which(first)
        try:
            with open(script or first, "rb") as fh:
                line = fh.readline().decode(errors="replace")
        except OSError:
            return None
        words = line[2:].split() if line.startswith("#!") else []
        if words and words[0].endswith("/env") and len(words) > 1:
            return shutil.which(words[1])
        return words[0] if words else None
    return shutil.which(launch.program[0]) or launch.program[0]


def recognise(argv: Sequence[str]) -> Launch:
    """The workload as its launcher runs it (UsageError: a launcher with no program after it)."""
    for launcher in LAUNCHERS.values():
        launch = launcher.recognise(argv)
        if launch is not None:
            return launch
    raise AssertionError("the plain launcher recognises every command")


__all__ = ["LAUNCHERS", "Launch", "Launcher", "ExitedRank", "interpreter", "recognise"]
