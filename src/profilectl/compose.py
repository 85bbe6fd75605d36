"""Host-side driver of the compose suite (python-on-whales): `profilectl docker <service>`.

Detects the GPU vendor to pick the device override, exports the host UID/GID (the services run as
that user, and outputs belong to them) and the video/render GIDs, creates a missing host traces
folder as the user (before the engine would, as root), builds the image if it is missing, runs the
one-shot service with `run --rm` (the arguments after the service as `docker compose run` takes them),
streams its output and returns its exit code. Docker's own failures (no engine, no image, a GPU
device the engine cannot give) are exit 2 with one line each, never the workload's exit 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from profilectl import settings
from profilectl.errors import ProfilectlError, UsageError

COMPOSE_NAME = "docker-compose.profiling.yml"
REPO_ENV = "PROFILECTL_REPO"
OVERRIDES = {"amd": Path("docker/compose.amd.yml"), "nvidia": Path("docker/compose.nvidia.yml")}
SERVICES = ("env-check", "profile", "counters", "trace")
STOP_GRACE_S = 35  # the services' stop_grace_period (30 s) and a little: compose stops the container first
# How Docker says it could not create or start a container (compose prints the engine's refusal
# and exits 1, the same code as a failed workload, so the text is what tells them apart)
ENGINE_ERROR_PREFIXES = ("Error response from daemon:", "Error: failed to", "error during connect")
ENGINE_ERROR_MARKERS = ("OCI runtime create failed", "failed to create task for container",
                        "could not select device driver", "error gathering device information")
OFFLINE_HINT = ("build the offline base (docker/offline-base/build.sh) and set "
                "PROFILECTL_BASE_IMAGE=profilectl-base:bookworm")


class DockerProblem(ProfilectlError):
    exit_code = 2


def project_dir(command: str = "profilectl docker") -> Path:
    """The folder with the compose suite (docker-compose.profiling.yml, docker/, src/, profiling/):
    $PROFILECTL_REPO, else the checkout this profilectl runs from, else the current folder or one
    of its parents (as `docker compose` itself looks). An installed wheel carries no build context,
    so it needs one of these."""
    explicit = settings.get_path(REPO_ENV)
    if explicit is not None:
        if not (explicit / COMPOSE_NAME).is_file():
            raise UsageError(f"${REPO_ENV}={explicit} has no {COMPOSE_NAME}: point it at a profilectl checkout")
        return explicit
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout, Path.cwd(), *Path.cwd().parents):
        if (candidate / COMPOSE_NAME).is_file() and (candidate / "docker" / "Dockerfile").is_file():
            return candidate
    raise UsageError(f"`{command}` needs the compose files of a profilectl checkout ({COMPOSE_NAME}, docker/), "
                     f"which an installed profilectl does not carry: run it inside a checkout, or set "
                     f"{REPO_ENV}=/path/to/profilectl")


def _whales() -> tuple[Any, Any]:
    try:
        from python_on_whales import DockerClient
        from python_on_whales.exceptions import DockerException
    except ImportError:
        raise UsageError("python-on-whales is missing: pip install 'profilectl[docker]' "
                         "(or pip install python-on-whales)") from None
    return DockerClient, DockerException


def explain(stderr: str, vendor: str | None = None) -> str | None:
    """A one-line reason for a docker failure, from what docker printed."""
    text = stderr.lower()
    if "error gathering device information" in text or ("/dev/kfd" in text and "no such file" in text):
        device = stderr.split('device "')[1].split('"')[0] if 'device "' in stderr else "/dev/kfd"
        return (f"the Docker engine's host has no {device}, which the AMD device grants need (no AMD GPU, or "
                "the amdgpu driver is not loaded): " + ("use --vendor none (no GPU grants) or a host with an AMD "
                "GPU" if vendor == "amd" else "leave out docker/compose.amd.yml"))
    if ("could not select device driver" in text and "nvidia" in text) or "unknown or invalid runtime name: nvidia" in text:
        return ("the Docker engine cannot give NVIDIA GPUs to containers: install the NVIDIA Container Toolkit on its "
                "host (nvidia-ctk runtime configure --runtime=docker, then restart Docker), " +
                ("or use --vendor none (no GPU grants)" if vendor == "nvidia"
                 else "or leave out docker/compose.nvidia.yml"))
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


MOUNTED_FOLDERS = ("PROFILECTL_TRACES_HOST_DIR", "PROFILECTL_APP_DIR")  # host paths of the compose volumes


def check_mount_sources() -> None:
    """The host folders the compose file mounts (`${VAR}:/workspace/...`, Compose's short volume
    syntax) are paths, whole: a ':' would split the volume into other fields (`:/workspace/profiling`
    mounts another folder, or none, and the run is written inside the container and removed with it),
    and a control character is no folder name anyone meant. Either is one line and exit 2, before
    any folder is made or anything runs."""
    for name in MOUNTED_FOLDERS:
        value = settings.raw(name)
        if value is None:
            continue
        bad = next((c for c in value if c == ":" or ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            what = "':'" if bad == ":" else f"the control character {bad!r}"
            raise UsageError(f"${name}={value!r} holds {what}, which Compose's volume syntax (SOURCE:TARGET) "
                             f"cannot carry in a path: name the host folder without it")


def prepare_host_folders(repo: Path) -> Path:
    """The host traces folder, created now as the user if missing: left to Compose, the engine would
    create it as root and the user could not delete the outputs. A missing application folder is
    a mistake (a typo in $PROFILECTL_APP_DIR), not something to create."""
    check_mount_sources()
    traces = settings.get_path("PROFILECTL_TRACES_HOST_DIR") or repo / "traces"
    if not traces.is_absolute():
        traces = repo / traces  # compose resolves relative host paths against the project folder
    try:
        traces.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the traces folder {traces}: {exc.strerror}") from None
    if not os.access(traces, os.W_OK | os.X_OK):
        raise UsageError(f"the traces folder {traces} is not writable by you (uid {os.getuid()}): the services "
                         f"run as you; fix its owner or set PROFILECTL_TRACES_HOST_DIR")
    app = settings.get_path("PROFILECTL_APP_DIR")
    if app is not None and not app.is_dir():
        raise UsageError(f"$PROFILECTL_APP_DIR={app} is not a folder: it is mounted as the workload's working folder")
    return traces


def client(repo: Path, vendor: str | None) -> Any:
    DockerClient, _ = _whales()
    files = [repo / COMPOSE_NAME] + ([repo / OVERRIDES[vendor]] if vendor in OVERRIDES else [])
    return DockerClient(compose_files=files, compose_project_directory=repo)


def run_service(service: str, service_args: list[str], vendor: str | None, build: bool = False,
                echo: Callable[[str], None] = print) -> int:
    """`docker compose run --rm SERVICE ARGS...`, ARGS as written (the entrypoint reads them the same
    way whichever of the two started it). The service's exit code is returned; Docker's own failures
    (no engine, no image, a device the engine cannot give) are a DockerProblem: exit 2, one line."""
    if service not in SERVICES:
        raise UsageError(f"unknown service {service!r}; services: {', '.join(SERVICES)}")
    check_mount_sources()
    repo = project_dir()
    _, DockerException = _whales()
    traces = prepare_host_folders(repo)
    os.environ.update(compose_environment())
    # the service names its run directory by this host path (PROFILECTL_TRACES_ON_HOST): the real one
    os.environ.setdefault("PROFILECTL_TRACES_HOST_DIR", str(traces))
    os.environ.setdefault("BUILDX_BUILDER", "default")  # a locally tagged base needs the default builder
    docker = client(repo, vendor)
    try:
        if not docker.compose.is_installed():
            raise DockerProblem("Docker Compose v2 is missing: install the compose plugin (tools/install-host-deps does)")
        config = docker.compose.config()
        image = config.services[service].image
        wanted = settings.get_str("PROFILECTL_BASE_IMAGE")
        if build or not docker.image.exists(image):
            echo(f"building {image} (base {wanted or 'default ROCm image'})")
            _build(docker, service, image)
        elif wanted and (built_on := base_of(docker, image)) != wanted:  # else the old image ran, silently
            echo(f"rebuilding {image}: it was built on {built_on or 'another base'}, PROFILECTL_BASE_IMAGE is {wanted}")
            _build(docker, service, image)
        before = set(p.name for p in traces.iterdir())
        code = run_one_shot([*docker.compose.docker_compose_cmd], service, service_args, vendor)
    except DockerException as exc:
        raise DockerProblem(explain(exc.stderr or "", vendor) or f"docker failed (exit {exc.return_code}): "
                            f"{last_line(exc.stderr or '') or 'no message'}") from None
    except FileNotFoundError:
        raise DockerProblem("the docker command is not installed") from None
    if code not in (0, 1):  # the service's own closing line names its run; one stopped early may not have
        for name in sorted(set(p.name for p in traces.iterdir()) - before):
            echo(f"run directory {traces / name}")
    return code


BASE_LABEL = "profilectl.base-image"  # docker/Dockerfile: the base the image was built on


def base_of(docker: Any, image: str) -> str | None:
    """The base image `image` was built on (its label), None when it does not say."""
    try:
        labels = docker.image.inspect(image).config.labels or {}
    except Exception:  # an engine that answers oddly: treat the base as unknown
        return None
    return labels.get(BASE_LABEL) or None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _build(docker: Any, service: str, image: str) -> None:
    """The image build, shown as it goes on a terminal (a spinner with BuildKit's latest step), silent
    off one; kept whole in a log file that a failure names."""
    from profilectl.progress import activity
    log = tempfile.NamedTemporaryFile("wb", prefix="profilectl-build-", suffix=".log", delete=False)
    try:
        with log, activity(f"building {image}") as update:
            for _source, line in docker.compose.build([service], stream_logs=True):
                log.write(line)
                update(line.decode(errors="replace"))
    except Exception as exc:
        stderr = getattr(exc, "stderr", None)
        if stderr is None:
            raise
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(stderr)
        reason = explain(text, None) or f"the image build failed: {last_line(text) or 'no message'}"
        raise DockerProblem(f"{reason} (whole build log: {log.name})") from None
    os.unlink(log.name)


def engine_error(lines: list[str]) -> str | None:
    """The line in which Docker said it could not create or start the container, if any: the service
    never ran, so its exit code (compose's 1) is Docker's failure, not the workload's."""
    for line in lines:
        text = line.strip()
        if text.startswith(ENGINE_ERROR_PREFIXES) or any(marker in text for marker in ENGINE_ERROR_MARKERS):
            return text
    return None


INTERRUPTED_BY_CTRL_C = 130  # compose run's exit status when SIGINT stopped it


def run_one_shot(compose_cmd: list[str], service: str, service_args: list[str], vendor: str | None) -> int:
    """Run the service with stdin and stdout as they are (a terminal stays a terminal) and compose's
    stderr read here: the container's own stderr is passed on line by line, Docker's refusal to
    create or start the container becomes one line and exit 2."""
    interactive = sys.stdout.isatty() and sys.stdin.isatty()
    argv = [*compose_cmd, "run", "--rm", *([] if interactive else ["--no-TTY"]), service, *service_args]
    held: list[str] = []
    process = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        for raw in process.stderr:
            text = raw.decode(errors="replace")
            if engine_error([text]):
                held.append(text)  # becomes the one line below, not Docker's own wording
                continue
            sys.stderr.write(text)
            sys.stderr.flush()
        code = process.wait()
        if code == INTERRUPTED_BY_CTRL_C:
            # compose stopped on the Ctrl-C before our own SIGINT was handled (a loaded machine): the
            # same interruption, said the same way
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        # compose got the same SIGINT and stops the container (the run is finalised as interrupted):
        # wait for it, and never leave it behind (a second Ctrl-C or the grace running out kills it)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            process.kill()
            process.wait()
        raise
    if code != 0 and (error := engine_error(held)):
        raise DockerProblem(explain(error, vendor) or f"Docker could not start the {service} container: "
                            f"{error.removeprefix('Error response from daemon: ')}")
    for line in held:  # not a failure after all: say what Docker said
        sys.stderr.write(line)
    return code
