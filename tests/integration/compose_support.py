"""What the compose and SLURM integration tests share besides fixtures.

Every test session gets names of its own (compose project, SLURM cluster, containers, networks,
volumes), so two copies of the suite can run on one Docker engine at once, and each removes only
what it created. Images are tagged by what they are built from (immutable, content-addressed): two
sessions with the same tree share one image safely, two different trees never overwrite each other.
"""

import hashlib
import os
import subprocess
import uuid
from pathlib import Path

from support import REPO

SESSION = uuid.uuid4().hex[:8]  # one per pytest process
PROJECT = f"profilectl-it-{SESSION}"
CLUSTER = f"profilectl-slurm-it-{SESSION}"
OFFLINE_BASE = os.environ.get("PROFILECTL_BASE_IMAGE", "profilectl-base:bookworm")
# Outputs must be handed to this user. As root: another user (4242), which proves files are handed
# over, not just created by whoever ran the test; otherwise the running user (only root can chown).
if os.geteuid() == 0:
    HOST_UID, HOST_GID = 4242, 4343
else:
    HOST_UID, HOST_GID = os.getuid(), os.getgid()

# What docker/Dockerfile copies into the project image (besides its base image).
IMAGE_INPUTS = ("docker/Dockerfile", "docker/entrypoint.py", "tools/profilectl", "src", "profiling")


def _digest_files(digest: "hashlib._Hash", root: Path) -> None:
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in paths:
        rel = path.relative_to(REPO)
        if "__pycache__" in rel.parts or path.suffix == ".pyc" or any(p.endswith(".egg-info") for p in rel.parts):
            continue  # .dockerignore leaves these out of the build context
        digest.update(f"{rel}\0{path.stat().st_mode & 0o111}\0".encode())
        digest.update(path.read_bytes())


def image_id(name: str) -> str | None:
    done = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def project_image_tag(base: str = OFFLINE_BASE) -> str:
    """profilectl-it:<digest of the base image id and of every file the Dockerfile copies>."""
    digest = hashlib.sha256((image_id(base) or base).encode())
    for name in IMAGE_INPUTS:
        _digest_files(digest, REPO / name)
    return f"profilectl-it:{digest.hexdigest()[:16]}"


def compose_argv(*args: str) -> list[str]:
    return ["docker", "compose", "-p", PROJECT, "-f", str(REPO / "docker-compose.profiling.yml"),
            "--project-directory", str(REPO), *args]
