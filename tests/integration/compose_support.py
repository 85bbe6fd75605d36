"""What the compose integration tests share besides fixtures."""

from support import REPO

IMAGE = "profilectl:integration"
PROJECT = "profilectl-it"
HOST_UID, HOST_GID = 4242, 4343  # not the test runner's: proves files are handed over, not just created


def compose_argv(*args: str) -> list[str]:
    return ["docker", "compose", "-p", PROJECT, "-f", str(REPO / "docker-compose.profiling.yml"),
            "--project-directory", str(REPO), *args]
