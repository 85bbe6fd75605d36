"""`profilectl docker`: the forms `docker compose run` takes, and Docker's own failures told apart from
the workload's (issue 18). A `docker` double on PATH plays the engine's part (no engine needed):
real processes, the CLI as a user starts it."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from support import REPO

# The docker CLI as profilectl's driver calls it: `compose --help`, `compose ... config`, `image
# inspect`, `compose ... build`, `compose ... run`. What `run` does is FAKE_RUN's choice; every call
# is recorded in FAKE_DOCKER_LOG.
FAKE_DOCKER = textwrap.dedent('''\
    #!PYTHON
    import json, os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    if args[:2] == ["compose", "--help"]:
        print("Usage:  docker compose [OPTIONS] COMMAND")
    elif args[:2] == ["image", "inspect"]:
        labels = {"profilectl.base-image": os.environ["FAKE_IMAGE_BASE"]} if "FAKE_IMAGE_BASE" in os.environ else {}
        print(json.dumps([{"Id": "sha256:" + "0" * 64, "RepoTags": [args[2]], "Config": {"Labels": labels}}]))
    elif "config" in args:
        services = {name: {"image": "profilectl:fake", "command": [name]}
                    for name in ("env-check", "profile", "counters", "trace")}
        print(json.dumps({"name": "fake", "services": services}))
    elif "build" in args and "run" not in args:
        sys.stderr.write("#1 [internal] load build definition from Dockerfile\\n#2 DONE 0.1s\\n")
    elif "run" in args:
        mode = os.environ.get("FAKE_RUN", "ok")
        sys.stderr.write(" Network fake_default  Creating\\n Network fake_default  Created\\n")
        if mode == "amd-device":
            sys.stderr.write('Error response from daemon: error gathering device information while adding custom '
                             'device "/dev/kfd": no such file or directory\\n')
            sys.exit(1)
        if mode == "nvidia-driver":
            sys.stderr.write('Error response from daemon: could not select device driver "nvidia" with '
                             'capabilities: [[gpu utility compute]]\\n')
            sys.exit(1)
        if mode == "oci":
            sys.stderr.write('Error response from daemon: failed to create task for container: OCI runtime create '
                             'failed: unable to start container process\\n')
            sys.exit(1)
        if mode == "interrupted":  # like compose: SIGINT stops the container, which finalises its run
            import signal, time
            def stop(signum, frame):
                time.sleep(0.5)
                open(os.environ["FAKE_DOCKER_LOG"] + ".stopped", "w").write(str(os.getpid()))
                sys.exit(130)
            signal.signal(signal.SIGINT, stop)
            print("started", flush=True)
            time.sleep(60)
            sys.exit(0)
        if mode == "made-run":  # the service's own closing line names the run it made
            run = os.path.join(os.environ["PROFILECTL_TRACES_HOST_DIR"], "20261127T120000Z-profile-abcdef")
            os.makedirs(run)
            print("ok profile via timing in 1.000 s → " + run)
            sys.exit(0)
        if mode == "workload-failed":
            print("matmul output")
            sys.stderr.write("profilectl: failed: the workload exited with code 1 (under timing)\\n")
            sys.exit(1)
        print("service output")
    else:
        sys.stderr.write("fake docker: unexpected " + " ".join(args) + "\\n")
        sys.exit(99)
    ''').replace("PYTHON", sys.executable)


@pytest.fixture
def docker_double(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "docker.log"
    # the integration tests' session names a base, an image and a compose project in os.environ: the
    # driver here must meet the environment a user's shell gives it, not theirs
    outside = {key: value for key, value in os.environ.items()
               if key not in ("PROFILECTL_BASE_IMAGE", "PROFILECTL_IMAGE", "COMPOSE_PROJECT_NAME")}
    env = dict(outside, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_DOCKER_LOG=str(log),
               PROFILECTL_REPO=str(REPO), PROFILECTL_TRACES_HOST_DIR=str(tmp_path / "traces"))

    def run(*args, fake_run="ok", **more_env):
        done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "docker", *args], text=True,
                              capture_output=True, env=dict(env, FAKE_RUN=fake_run, **more_env),
                              stdin=subprocess.DEVNULL, timeout=60)
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        return done, calls
    return run


def run_call(calls):
    runs = [call for call in calls if "run" in call]
    assert len(runs) == 1, calls
    call = runs[0]
    return call[call.index("run") + 1:]


@pytest.mark.parametrize("fake_run, vendor, words", [
    ("amd-device", "amd", ["/dev/kfd", "--vendor none"]),
    ("nvidia-driver", "nvidia", ["NVIDIA Container Toolkit", "--vendor none"]),
    ("oci", "none", ["could not start the counters container", "OCI runtime create failed"]),
])
def test_a_container_docker_cannot_start_is_exit_2_in_one_line(docker_double, fake_run, vendor, words):
    done, calls = docker_double("--vendor", vendor, "counters", fake_run=fake_run)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("profilectl:") or "Error" in line]
    assert len(lines) == 1, done.stderr  # Docker's own wording is not repeated beside profilectl's line
    assert all(word in lines[0] for word in words), lines[0]
    if vendor != "none":  # the override of the vendor asked for was given to compose
        assert any(f"docker/compose.{vendor}.yml" in " ".join(call) for call in calls)


def test_a_failed_workload_keeps_its_own_exit_code_and_message(docker_double):
    done, _ = docker_double("--vendor", "none", "profile", fake_run="workload-failed")
    assert done.returncode == 1
    assert "profilectl: failed: the workload exited with code 1" in done.stderr
    assert "matmul output" in done.stdout


@pytest.mark.parametrize("args, service, passed", [
    (["profile", "--repeat", "2", "--", "./app"], "profile", ["--repeat", "2", "--", "./app"]),
    (["profile", "--repeat", "2", "--warmup", "0", "--", "./app", "--size", "8"], "profile",
     ["--repeat", "2", "--warmup", "0", "--", "./app", "--size", "8"]),
    (["trace", "--preset", "api", "--", "python3", "train.py"], "trace",
     ["--preset", "api", "--", "python3", "train.py"]),
    (["trace", "python3", "train.py"], "trace", ["python3", "train.py"]),
    (["trace", "--", "python3", "train.py"], "trace", ["--", "python3", "train.py"]),
    (["counters", "--set", "memory_bound", "--", "./app", "--", "x"], "counters",
     ["--set", "memory_bound", "--", "./app", "--", "x"]),
    (["env-check", "env-check", "--json"], "env-check", ["env-check", "--json"]),
    (["profile"], "profile", []),
    # the driver's own options, before the service as compose's are, or after it as they used to be
    (["--vendor", "none", "--build", "profile", "--repeat", "3"], "profile", ["--repeat", "3"]),
    (["profile", "--vendor", "none", "--repeat", "3", "--", "./app", "--vendor", "x"], "profile",
     ["--repeat", "3", "--", "./app", "--vendor", "x"]),
])
def test_the_service_gets_what_docker_compose_run_would(docker_double, args, service, passed):
    if "--vendor" not in args[:args.index("--") if "--" in args else len(args)]:
        args = ["--vendor", "none", *args]
    done, calls = docker_double(*args)
    assert done.returncode == 0, done.stderr
    assert "service output" in done.stdout
    assert run_call(calls) == ["--rm", "--no-TTY", service, *passed]
    assert any("build" in call and "run" not in call for call in calls) == ("--build" in args)


def test_a_bad_vendor_after_the_service_is_a_usage_error(docker_double):
    done, calls = docker_double("profile", "--vendor", "intel")
    assert done.returncode == 2 and "invalid choice: 'intel'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not calls


def test_outside_a_checkout_each_command_names_itself(tmp_path):
    """An installed profilectl (the package alone, as a wheel puts it) run in a folder with no compose
    files: `cluster` and `docker` each say that they need a checkout, each by its own name."""
    import shutil
    site = tmp_path / "site"
    shutil.copytree(REPO / "src" / "profilectl", site / "profilectl", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PROFILECTL_REPO"}
    env["PYTHONPATH"] = str(site)
    for command, named in ((["cluster", "status"], "`profilectl cluster`"),
                           (["docker", "--vendor", "none", "profile"], "`profilectl docker`")):
        done = subprocess.run([sys.executable, "-m", "profilectl", *command], cwd=work, capture_output=True,
                              text=True, env=env, timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"profilectl: {named} needs"), lines
        assert "PROFILECTL_REPO" in lines[0]


def test_ctrl_c_waits_for_compose_to_stop_the_container_and_exits_130(docker_double, tmp_path):
    """Ctrl-C reaches the whole foreground group: profilectl waits for compose to stop the container
    (the run inside is finalised) instead of leaving it behind, then exits 130."""
    import signal
    import time
    # the integration tests' session names a base, an image and a compose project in os.environ: the
    # driver here must meet the environment a user's shell gives it, not theirs
    outside = {key: value for key, value in os.environ.items()
               if key not in ("PROFILECTL_BASE_IMAGE", "PROFILECTL_IMAGE", "COMPOSE_PROJECT_NAME")}
    env = dict(outside, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", FAKE_RUN="interrupted",
               FAKE_DOCKER_LOG=str(tmp_path / "docker.log"), PROFILECTL_REPO=str(REPO),
               PROFILECTL_TRACES_HOST_DIR=str(tmp_path / "traces"))
    process = subprocess.Popen([sys.executable, str(REPO / "tools/profilectl"), "docker", "--vendor", "none", "profile"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                               start_new_session=True, text=True)
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.3)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    assert process.wait(timeout=30) == 130
    stopped = tmp_path / "docker.log.stopped"
    assert stopped.is_file()  # compose finished its stop before profilectl exited
    compose_pid = int(stopped.read_text())
    assert not os.path.exists(f"/proc/{compose_pid}") or "zombie" in open(f"/proc/{compose_pid}/status").read().lower()
    assert "interrupted" in process.stderr.read()


def test_another_base_image_rebuilds_the_image_and_says_why(docker_double):
    """PROFILECTL_BASE_IMAGE names the base to build on: an image built on another one (its
    profilectl.base-image label) is rebuilt, said in one line, never run silently as it was."""
    wanted = "profilectl-base:bookworm-torch"
    done, calls = docker_double("--vendor", "none", "trace", "--", "python3", "train.py",
                                PROFILECTL_BASE_IMAGE=wanted, FAKE_IMAGE_BASE="profilectl-base:bookworm")
    assert done.returncode == 0, done.stderr
    assert any("build" in call and "run" not in call for call in calls)
    assert f"rebuilding profilectl:fake: it was built on profilectl-base:bookworm, PROFILECTL_BASE_IMAGE is {wanted}" \
        in done.stderr
    done, calls = docker_double("--vendor", "none", "trace", PROFILECTL_BASE_IMAGE=wanted, FAKE_IMAGE_BASE=wanted)
    assert done.returncode == 0 and not any("build" in call and "run" not in call for call in calls)


def test_the_run_directory_is_named_once(docker_double, tmp_path):
    """The service's closing line names its run directory by its host path: the driver does not name it again."""
    done, calls = docker_double("--vendor", "none", "profile", fake_run="made-run")
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).count("20261127T120000Z-profile-abcdef") == 1, done.stdout + done.stderr
