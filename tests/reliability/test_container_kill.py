"""The root `counters` service killed from outside: `docker kill`, and the kernel's OOM killer under a
container memory limit. Nothing the workload (or profilectl) wrote into the host folders may be left
root-owned: profilectl becomes the host user, keeping a capability only where counters need one
(none here: no GPU, so --fallback profiles), so files are the user's as they are written, not handed
back at an end that a kill never reaches. And the user's program holds no capability and finds no
root process of ours to attack (the entrypoint execs profilectl instead of waiting as root).

Real Docker engine, an image of this checkout built for this module only from the offline base
($PROFILECTL_BASE_IMAGE, default profilectl-base:bookworm, built here where the engine lacks it, as the
integration tests build it), containers and the image tag named with a random suffix and removed
afterwards (nothing anyone else made is touched)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from support import REPO

BASE = os.environ.get("PROFILECTL_BASE_IMAGE", "profilectl-base:bookworm")
# The host user: as root, one that is not root (no account needed: owners are numbers); as a normal
# user, that user (the folders are theirs already, and only root could give them to anyone else).
HOST_UID, HOST_GID = (54321, 54322) if os.geteuid() == 0 else (os.getuid(), os.getgid())
SUFFIX = secrets.token_hex(4)


def docker(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def engine_unreachable() -> str | None:
    """Why these scenarios cannot run here, or None. A missing offline base is no reason: the image
    fixture builds it (asked at collection, a fresh engine's missing base skipped both tests in CI
    while the integration tests, collected alongside, built it minutes later)."""
    if shutil.which("docker") is None:
        return "no docker CLI"
    try:
        if docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False).returncode != 0:
            return "the Docker engine is not reachable"
    except subprocess.TimeoutExpired:
        return "the Docker engine does not answer"
    return None


WHY_NOT = engine_unreachable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"needs Docker: {WHY_NOT}")


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """This checkout's image (src, profiling, the entrypoint), tagged for this module alone
    ($PROFILECTL_RELIABILITY_IMAGE: an image of this checkout someone built already, used as is)."""
    given = os.environ.get("PROFILECTL_RELIABILITY_IMAGE")
    if given:
        yield given
        return
    # the offline base, as the integration tests get it: built where missing, rebuilt only when its
    # package list changed (a no-op once they have run)
    subprocess.run([str(REPO / "docker/offline-base/build.sh"), BASE], check=True, timeout=3600)
    context = tmp_path_factory.mktemp("image-context")
    for part in ("src", "profiling"):
        shutil.copytree(REPO / part, context / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (context / "tools").mkdir()
    shutil.copy2(REPO / "tools" / "profilectl", context / "tools" / "profilectl")
    (context / "docker").mkdir()
    shutil.copy2(REPO / "docker" / "entrypoint.py", context / "docker" / "entrypoint.py")
    tag = f"profilectl:reliability-{SUFFIX}"
    env = dict(os.environ, DOCKER_BUILDKIT="0")  # the classic builder: no buildx, no registry
    built = subprocess.run(["docker", "build", "-q", "-t", tag, "--build-arg", f"BASE_IMAGE={BASE}", "-f",
                            str(REPO / "docker" / "Dockerfile"), str(context)], capture_output=True, text=True,
                           env=env, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        yield tag
    finally:
        docker("image", "rm", "-f", tag, check=False)  # our tag only; the layers shared with the base stay


def counters_service(image: str, name: str, host: Path, workload: str, *extra: str) -> list[str]:
    """`docker run` of the counters service as docker-compose.profiling.yml defines it."""
    return ["run", "-d", "--name", name, "--init", "--user", "0:0", "--cap-add", "SYS_ADMIN", "--cap-add", "SYS_PTRACE",
            "-e", "PROFILECTL_SERVICE=counters", "-e", "PROFILECTL_SERVICE_OPTIONS=--fallback",
            "-e", f"PROFILECTL_HOST_UID={HOST_UID}", "-e", f"PROFILECTL_HOST_GID={HOST_GID}",
            "-v", f"{host / 'traces'}:/workspace/traces", "-v", f"{host / 'app'}:/workspace/app",
            "-w", "/workspace/app", *extra, image, "--no-sample",
            "--", "sh", "-c", workload]


def host_folders(tmp_path: Path) -> Path:
    for name in ("traces", "app"):
        (tmp_path / name).mkdir()
        if os.geteuid() == 0:
            os.chown(tmp_path / name, HOST_UID, HOST_GID)
    return tmp_path


def root_owned(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in [top, *top.rglob("*")] if os.lstat(p).st_uid == 0)


def wait_for_files(folder: Path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if folder.is_dir() and len(list(folder.iterdir())) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"the workload never wrote {count} files into {folder}")


@pytest.fixture
def container():
    names: list[str] = []

    def name() -> str:
        names.append(f"profilectl-reliability-{SUFFIX}-{len(names)}")
        return names[-1]
    yield name
    for made in names:
        docker("rm", "-f", made, check=False)


WRITER = "grep -E '^Cap(Eff|Amb)' /proc/self/status > caps.txt; id -u > uid.txt; " \
         "grep -lE '^Uid:[[:space:]]+0[[:space:]]' /proc/[0-9]*/status > root-processes.txt; mkdir -p out; i=0; " \
         "while :; do echo $i > out/f$i; i=$((i+1)); sleep 0.05; done"


def test_docker_kill_of_the_counters_service_leaves_nothing_root_owned(image, container, tmp_path):
    host = host_folders(tmp_path)
    name = container()
    docker(*counters_service(image, name, host, WRITER))
    wait_for_files(host / "app" / "out", 10)
    docker("kill", name)
    docker("wait", name, check=False)
    assert root_owned(host / "app") == [] and root_owned(host / "traces") == [], \
        (root_owned(host / "app")[:10], root_owned(host / "traces")[:10])
    assert (host / "app" / "uid.txt").read_text().strip() == str(HOST_UID)
    caps = dict(line.split() for line in (host / "app" / "caps.txt").read_text().splitlines())
    assert int(caps["CapAmb:"], 16) == 0 and int(caps["CapEff:"], 16) == 0, caps  # no GPU counters: no capability
    # the only root process left is the container's init (the entrypoint exec'd profilectl, which became the user)
    assert (host / "app" / "root-processes.txt").read_text().split() == ["/proc/1/status"]


def test_an_oom_kill_in_the_counters_service_leaves_nothing_root_owned(image, container, tmp_path):
    host = host_folders(tmp_path)
    name = container()
    hog = ("mkdir -p out; for i in 1 2 3 4 5 6 7 8; do echo $i > out/f$i; done; "
           "python3 -c \"a = []\nwhile True: a.append(bytearray(8 << 20))\"")
    docker(*counters_service(image, name, host, hog, "--memory", "96m", "--memory-swap", "96m"))
    docker("wait", name, timeout=300)
    oom = docker("inspect", "-f", "{{.State.OOMKilled}} {{.State.ExitCode}}", name).stdout.split()
    logs = docker("logs", name, check=False)
    assert (host / "app" / "out" / "f8").is_file(), logs.stdout[-2000:] + logs.stderr[-2000:]
    assert root_owned(host / "app") == [] and root_owned(host / "traces") == [], \
        (root_owned(host / "app")[:10], root_owned(host / "traces")[:10], oom)
    killed = "Killed" in logs.stderr or "signal 9" in logs.stderr or oom[0] == "true" or oom[1] != "0"
    assert killed, (oom, logs.stderr[-2000:])  # the memory limit did kill something
