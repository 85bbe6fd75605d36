"""`profilectl cluster up|down|status|exec`: the SLURM test cluster of docker/slurm/ (a controller
and two compute nodes in Compose). The cluster's logic, building its image and waiting for idle
nodes, lives in docker/slurm/cluster.sh, which also works without profilectl; this only finds it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from profilectl.compose import project_dir
from profilectl.errors import UsageError

ACTIONS = ("up", "down", "status", "exec", "build", "logs")


def script() -> Path:
    path = project_dir("profilectl cluster") / "docker" / "slurm" / "cluster.sh"
    if not path.is_file():
        raise UsageError(f"{path} is missing: `profilectl cluster` needs a full profilectl checkout")
    return path


def run(action: str, args: list[str]) -> int:
    if action not in ACTIONS:
        raise UsageError(f"unknown cluster action {action!r}; actions: {', '.join(ACTIONS)}")
    if action == "exec" and not args:
        raise UsageError("cluster exec needs a command to run in the controller, e.g. "
                         "`profilectl cluster exec -- srun -N2 -n4 hostname`")
    # cluster.sh names the next commands in the caller's own words
    env = dict(os.environ, PROFILECTL_CLUSTER_CALLER="profilectl cluster exec --")
    return subprocess.run([str(script()), action, *args], check=False, env=env).returncode
