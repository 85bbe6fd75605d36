"""Host-side driver of the compose suite (python-on-whales): `profilectl docker <service>`.

Detects the GPU vendor to pick the device override, exports the host UID/GID (the services run as
that user, and outputs belong to them) and the video/render GIDs, creates a missing host traces
folder as the user (before the engine would, as root), builds the image if it is missing, runs the
one-shot service with `run --rm`, streams its output and returns its exit code. Docker's own
failures become one line each.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from profilectl.errors import ProfilectlError, UsageError

COMPOSE_NAME = "docker-compose.profiling.yml"
REPO_ENV = "PROFILECTL_REPO"
OVERRIDES = {"amd": Path("docker/compose.amd.yml"), "nvidia": Path("docker/compose.nvidia.yml")}
SERVICES = ("env-check", "profile", "counters", "trace")
OFFLINE_HINT = ("build the offline base (docker/offline-base/build.sh) and set "
                "PROFILECTL_BASE_IMAGE=profilectl-base:bookworm")


class DockerProblem(ProfilectlError):
    exit_code = 2


def project_dir() -> Path:
    """The folder with the compose suite (docker-compose.profiling.yml, docker/, src/, profiling/):
    $PROFILECTL_REPO, else the checkout this profilectl runs from, else the current folder or one
    of its parents (as `docker compose` itself looks). An installed wheel carries no build context,
    so it needs one of these."""
    explicit = os.environ.get(REPO_ENV)
    if explicit:
        if not (Path(explicit) / COMPOSE_NAME).is_file():
            raise UsageError(f"${REPO_ENV}={explicit} has no {COMPOSE_NAME}: point it at a profilectl checkout")
        return Path(explicit)
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout, Path.cwd(), *Path.cwd().parents):
        if (candidate / COMPOSE_NAME).is_file() and (candidate / "docker" / "Dockerfile").is_file():
            return candidate
    raise UsageError(f"`profilectl docker` needs the compose suite of a profilectl checkout ({COMPOSE_NAME}, "
                     f"docker/): run it inside a checkout, or set {REPO_ENV}=/path/to/profilectl")


def _whales() -> tuple[Any, Any]:
    try:
        from python_on_whales import DockerClient
        from python_on_whales.exceptions import DockerException
    except ImportError:
        raise UsageError("python-on-whales is missing: pip install 'profilectl[docker]' "
                         "(or pip install python-on-whales)") from None
    return DockerClient, DockerException


def explain(stderr: str) -> str | None:
    """A one-line reason for a docker failure, from what docker printed."""
    text = stderr.lower()
    if "permission denied" in text and "docker" in text and "sock" in text:
        return "permission denied on the Docker socket: add your user to the docker group (then log in again)"
    if "cannot connect to the docker daemon" in text or "is the docker daemon running" in text:
        return "no Docker engine is reachable: start it (systemctl start docker) or set DOCKER_HOST"
    if "pull access denied" in text or "failed to resolve source metadata" in text or \
            ("not found" in text and ("manifest" in text or "repository" in text)) or "no such host" in text:
        return f"the base image is not available locally and no registry can be reached: {OFFLINE_HINT}"
    if "'compose' is not a docker command" in text or "unknown command: docker compose" in text:
        return "Docker Compose v2 is missing: install the compose plugin (tools/install-host-deps does)"
    return None


def device_gid(pattern: str) -> str | None:
    for path in sorted(Path("/").glob(pattern.lstrip("/"))):
        try:
            return str(path.stat().st_gid)
        except OSError:
            continue
    return None


def compose_environment() -> dict[str, str]:
    env = {"HOST_UID": str(os.getuid()), "HOST_GID": str(os.getgid())}
    if (gid := device_gid("/dev/kfd")):
        env["VIDEO_GID"] = gid
    if (gid := device_gid("/dev/dri/renderD*")):
        env["RENDER_GID"] = gid
    return env


def prepare_host_folders(repo: Path) -> Path:
    """The host traces folder, created now as the user if missing: left to Compose, the engine would
    create it as root and the user could not delete the outputs. A missing application folder is
    a mistake (a typo in $PROFILECTL_APP_DIR), not something to create."""
    traces = Path(os.environ.get("PROFILECTL_TRACES_HOST_DIR") or repo / "traces")
    if not traces.is_absolute():
        traces = repo / traces  # compose resolves relative host paths against the project folder
    try:
        traces.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the traces folder {traces}: {exc.strerror}") from None
    if not os.access(traces, os.W_OK | os.X_OK):
        raise UsageError(f"the traces folder {traces} is not writable by you (uid {os.getuid()}): the services "
                         f"run as you; fix its owner or set PROFILECTL_TRACES_HOST_DIR")
    app = os.environ.get("PROFILECTL_APP_DIR")
    if app and not Path(app).is_dir():
        raise UsageError(f"$PROFILECTL_APP_DIR={app} is not a folder: it is mounted as the workload's working folder")
    return traces


def client(repo: Path, vendor: str | None) -> Any:
    DockerClient, _ = _whales()
    files = [repo / COMPOSE_NAME] + ([repo / OVERRIDES[vendor]] if vendor in OVERRIDES else [])
    return DockerClient(compose_files=files, compose_project_directory=repo)


def run_service(service: str, workload: list[str], vendor: str | None, build: bool = False,
                echo: Callable[[str], None] = print) -> int:
    if service not in SERVICES:
        raise UsageError(f"unknown service {service!r}; services: {', '.join(SERVICES)}")
    repo = project_dir()
    _, DockerException = _whales()
    traces = prepare_host_folders(repo)
    os.environ.update(compose_environment())
    os.environ.setdefault("BUILDX_BUILDER", "default")  # a locally tagged base needs the default builder
    docker = client(repo, vendor)
    try:
        if not docker.compose.is_installed():
            raise DockerProblem("Docker Compose v2 is missing: install the compose plugin (tools/install-host-deps does)")
        config = docker.compose.config()
        image = config.services[service].image
        if build or not docker.image.exists(image):
            echo(f"building {image} (base {os.environ.get('PROFILECTL_BASE_IMAGE') or 'default ROCm image'})")
            docker.compose.build([service])
        command = list(config.services[service].command or [])
        if workload:
            command += ["--", *workload]
        before = set(p.name for p in traces.iterdir())
        code = _run(docker, service, command, DockerException)
    except DockerException as exc:
        raise DockerProblem(explain(exc.stderr or "") or f"docker failed (exit {exc.return_code}): "
                            f"{(exc.stderr or '').strip().splitlines()[-1:] or ['no message']}") from None
    except FileNotFoundError:
        raise DockerProblem("the docker command is not installed") from None
    new = sorted(set(p.name for p in traces.iterdir()) - before)
    for name in new:
        echo(f"run directory {traces / name}")
    return code


def _run(docker: Any, service: str, command: list[str], DockerException: Any) -> int:
    interactive = sys.stdout.isatty() and sys.stdin.isatty()
    try:
        if interactive:
            docker.compose.run(service, command, remove=True, tty=True)
        else:
            for source, line in docker.compose.run(service, command, remove=True, tty=False, stream=True):
                stream = sys.stdout if source == "stdout" else sys.stderr
                stream.buffer.write(line)
                stream.flush()
    except DockerException as exc:
        if explain(exc.stderr or ""):
            raise
        return exc.return_code  # the service's own exit code (profilectl's contract)
    return 0
