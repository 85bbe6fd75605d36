"""The host folders `profilectl docker` hands to Compose's short volume syntax (SOURCE:TARGET). A
$PROFILECTL_TRACES_HOST_DIR of `:/workspace/profiling` split into other fields: the run was written
inside the container, removed with it, and the command exited 0 (and a folder named `:` was made in
the project). Now a ':' or a control character in a mounted host path is one line and exit 2 before
any folder is made or Docker is called. A `docker` double on PATH records what would have run."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
from support import REPO

FAKE_DOCKER = textwrap.dedent('''\
    #!PYTHON
    import json, os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    if args[:2] == ["compose", "--help"]:
        print("Usage:  docker compose [OPTIONS] COMMAND")
    elif args[:2] == ["image", "inspect"]:
        print(json.dumps([{"Id": "sha256:" + "0" * 64, "RepoTags": [args[2]]}]))
    elif "config" in args:
        services = {name: {"image": "profilectl:fake", "command": [name]}
                    for name in ("env-check", "profile", "counters", "trace")}
        print(json.dumps({"name": "fake", "services": services}))
    elif "run" in args:  # the service "ran": its run written wherever the volume put it
        print("service output")
    ''').replace("PYTHON", sys.executable)


@pytest.mark.parametrize("name, value", [
    ("PROFILECTL_TRACES_HOST_DIR", ":/workspace/profiling"),
    ("PROFILECTL_TRACES_HOST_DIR", "out/traces:/workspace/profiling:ro"),
    ("PROFILECTL_TRACES_HOST_DIR", "traces\n"),
    ("PROFILECTL_APP_DIR", ".:/workspace/traces"),
])
def test_a_mounted_host_path_compose_would_split_is_one_line_before_anything_runs(harness, tmp_path, name, value):
    project = tmp_path / "project"  # the compose files of a checkout, in a folder of the test's own
    (project / "docker").mkdir(parents=True)
    shutil.copy2(REPO / "docker-compose.profiling.yml", project)
    shutil.copy2(REPO / "docker" / "Dockerfile", project / "docker")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "docker.log"
    env = dict(harness.env, PATH=f"{bin_dir}{os.pathsep}{harness.env['PATH']}", FAKE_DOCKER_LOG=str(log),
               PROFILECTL_REPO=str(project), **{name: value})
    before = sorted(p.name for p in project.iterdir())
    done = subprocess.run(harness.argv("docker", "--vendor", "none", "profile"), capture_output=True, text=True,
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("profilectl:") and name in lines[0], done.stderr
    assert not log.exists() or not [json.loads(line) for line in log.read_text().splitlines()], \
        "Docker was called"
    assert sorted(p.name for p in project.iterdir()) == before  # no folder made for the odd name
