"""Integration tests: the real compose services on this machine's Docker engine.

The image is built once per session from the offline base (docker/offline-base/build.sh, which
rebuilds the base only when its package list changed), exactly as CI and a registry-less user do.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compose_support import HOST_GID, HOST_UID, IMAGE, PROJECT  # noqa: E402
from support import REPO  # noqa: E402

OFFLINE_BASE = os.environ.get("PROFILECTL_BASE_IMAGE", "profilectl-base:bookworm")


@pytest.fixture(scope="session")
def docker_client():
    from python_on_whales import DockerClient
    subprocess.run([str(REPO / "docker/offline-base/build.sh"), OFFLINE_BASE], check=True)
    os.environ.update({"PROFILECTL_BASE_IMAGE": OFFLINE_BASE, "PROFILECTL_IMAGE": IMAGE, "BUILDX_BUILDER": "default"})
    client = DockerClient(compose_files=[REPO / "docker-compose.profiling.yml"], compose_project_directory=REPO,
                          compose_project_name=PROJECT)
    client.compose.build(["env-check"])
    return client


@pytest.fixture
def traces(tmp_path, monkeypatch):
    folder = tmp_path / "traces"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, HOST_UID, HOST_GID)
    monkeypatch.setenv("PROFILECTL_TRACES_HOST_DIR", str(folder))
    monkeypatch.setenv("HOST_UID", str(HOST_UID))
    monkeypatch.setenv("HOST_GID", str(HOST_GID))
    return folder
