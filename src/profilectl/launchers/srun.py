"""srun (SLURM): each task runs the program on its node with SLURM_PROCID; a profiler goes inside,
`srun [options] <profiler> -- <program>`, as rocprofv3's at-scale guidance lays it out."""

from __future__ import annotations

from profilectl.launchers.base import EachRankRunsTheProgram


class Srun(EachRankRunsTheProgram):
    name = "srun"
