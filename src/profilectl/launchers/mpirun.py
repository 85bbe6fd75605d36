"""mpirun / mpiexec (Open MPI, MPICH/Hydra): each rank runs the program; a profiler goes inside,
before each rank's program, so every rank has its own profiler and its own output."""

from __future__ import annotations

from profilectl.launchers.base import EachRankRunsTheProgram


class Mpirun(EachRankRunsTheProgram):
    name = "mpirun"
