"""Integration tests: the real compose services on this machine's Docker engine.

The image is built once per session from the offline base (docker/offline-base/build.sh, built here
if missing), exactly as CI and a registry-less user do.
"""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OFFLINE_BASE = os.environ.get("PROFILECTL_BASE_IMAGE", "profilectl-base:bookworm")
IMAGE = "profilectl:integration"
HOST_UID, HOST_GID = 4242, 4343  # not the test runner's: proves files are handed over, not just created


@pytest.fixture(scope="session")
def docker_client():
    from python_on_whales import DockerClient
    plain = DockerClient()
    if not plain.image.exists(OFFLINE_BASE):
        subprocess.run([str(REPO / "docker/offline-base/build.sh"), OFFLINE_BASE], check=True)
    os.environ.update({"PROFILECTL_BASE_IMAGE": OFFLINE_BASE, "PROFILECTL_IMAGE": IMAGE, "BUILDX_BUILDER": "default"})
    client = DockerClient(compose_files=[REPO / "docker-compose.profiling.yml"], compose_project_directory=REPO,
                          compose_project_name="profilectl-it")
    client.compose.build(["env-check"])
    return client


@pytest.fixture
def traces(tmp_path, monkeypatch):
    folder = tmp_path / "traces"
    folder.mkdir()
    os.chown(folder, HOST_UID, HOST_GID) if os.geteuid() == 0 else None
    monkeypatch.setenv("PROFILECTL_TRACES_HOST_DIR", str(folder))
    monkeypatch.setenv("HOST_UID", str(HOST_UID))
    monkeypatch.setenv("HOST_GID", str(HOST_GID))
    return folder


def compose_argv(*args):
    return ["docker", "compose", "-p", "profilectl-it", "-f", str(REPO / "docker-compose.profiling.yml"),
            "--project-directory", str(REPO), *args]
