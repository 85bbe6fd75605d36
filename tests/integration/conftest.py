"""Integration tests: the real compose services on this machine's Docker engine.

The image is built once from the offline base (docker/offline-base/build.sh, which rebuilds the
base only when its package list changed), exactly as CI and a registry-less user do, and tagged by
what it is built from; the compose project is this session's own and is removed at the end, so a
second copy of the suite can run on the same engine at the same time.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compose_support import HOST_GID, HOST_UID, OFFLINE_BASE, PROJECT, compose_argv, image_id, project_image_tag  # noqa: E402
from support import REPO  # noqa: E402


@pytest.fixture(scope="session")
def project_image():
    """The project image of this tree on the offline base: built only when no image of the same
    inputs exists (the tag is a digest of them, so it is never replaced under another session)."""
    subprocess.run([str(REPO / "docker/offline-base/build.sh"), OFFLINE_BASE], check=True)
    tag = project_image_tag(OFFLINE_BASE)
    os.environ.update({"PROFILECTL_BASE_IMAGE": OFFLINE_BASE, "PROFILECTL_IMAGE": tag, "BUILDX_BUILDER": "default"})
    if image_id(tag) is None:
        subprocess.run(compose_argv("build", "env-check"), check=True)
    return tag


@pytest.fixture(scope="session")
def docker_client(project_image):
    from python_on_whales import DockerClient
    # tools/profilectl docker, run by the tests, finds this session's project through the environment
    os.environ["COMPOSE_PROJECT_NAME"] = PROJECT
    client = DockerClient(compose_files=[REPO / "docker-compose.profiling.yml"], compose_project_directory=REPO,
                          compose_project_name=PROJECT)
    try:
        yield client
    finally:  # this session's containers and network; the images stay (content-addressed, shared)
        subprocess.run(compose_argv("down", "--remove-orphans", "--timeout", "5"), capture_output=True)


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
