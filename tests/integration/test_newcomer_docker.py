"""Issue 18's first-run findings on a real engine: a traces folder Docker creates while HOST_UID is set,
Docker's own refusals as exit 2, and `profilectl docker` taking the forms `docker compose run` takes.

Each test runs under its own compose project name and removes what it created (the network); the
image is the session's (conftest's docker_client)."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from support import REPO

pytestmark = pytest.mark.integration
OTHER_UID, OTHER_GID = 4321, 4322  # as root: a user that is not the runner proves the folder is handed over


@pytest.fixture
def project(monkeypatch):
    name = f"i18new-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", name)
    yield name
    subprocess.run(["docker", "compose", "-p", name, "-f", str(REPO / "docker-compose.profiling.yml"),
                    "--project-directory", str(REPO), "down", "--remove-orphans"], capture_output=True, timeout=120)


def host_user():
    return (OTHER_UID, OTHER_GID) if os.geteuid() == 0 else (os.getuid(), os.getgid())


def test_with_host_uid_set_a_traces_folder_docker_creates_is_given_to_the_user(docker_client, project, tmp_path,
                                                                                  monkeypatch):
    """README: `HOST_UID=$(id -u) HOST_GID=$(id -g) docker compose ... run --rm profile ...` with no traces
    folder yet: the engine creates it as root; the entrypoint gives it to HOST_UID and the run passes."""
    uid, gid = host_user()
    missing = tmp_path / "new" / "traces"
    monkeypatch.setenv("PROFILECTL_TRACES_HOST_DIR", str(missing))
    monkeypatch.setenv("HOST_UID", str(uid))
    monkeypatch.setenv("HOST_GID", str(gid))
    done = subprocess.run(["docker", "compose", "-p", project, "-f", str(REPO / "docker-compose.profiling.yml"),
                           "--project-directory", str(REPO), "run", "--rm", "--no-TTY", "profile", "--repeat", "1",
                           "--warmup", "0", "--", "python3", "-c", "import os; print('uid', os.getuid())"],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [missing, *missing.rglob("*")]}
    assert owners == {(uid, gid)}, owners
    (run,) = [p for p in missing.iterdir() if p.is_dir()]
    assert f"uid {uid}" in (run / "stdout.log").read_text()


def profilectl_docker(*args):
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "docker", *args], capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this host has an AMD GPU: the AMD grants would work")
def test_amd_grants_on_a_host_without_an_amd_gpu_are_exit_2_in_one_line(docker_client, project, traces):
    done = profilectl_docker("--vendor", "amd", "counters")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("profilectl: ") and "/dev/kfd" in lines[-1] and "--vendor none" in lines[-1]
    assert not any("Error response from daemon" in line for line in lines)
    assert not list(traces.iterdir())  # nothing ran


def test_the_driver_passes_service_options_as_compose_run_does(docker_client, project, traces):
    done = profilectl_docker("--vendor", "none", "profile", "--repeat", "2", "--warmup", "0", "--", "python3", "-c",
                             "print('hello')")
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = [p for p in traces.iterdir() if p.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload"] == ["python3", "-c", "print('hello')"] and len(manifest["steps"]) == 2
    failed = profilectl_docker("--vendor", "none", "profile", "--repeat", "1", "--warmup", "0", "--", "python3", "-c",
                               "raise SystemExit(1)")
    assert failed.returncode == 1  # the workload's failure stays exit 1, with profilectl's own line
    assert "profilectl: failed" in failed.stderr
