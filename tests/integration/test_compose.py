"""The four services run for real on this engine (a host with no GPU, like CI)."""

import json
import os
import subprocess
import sys
import time

import pytest
from python_on_whales.exceptions import DockerException

from compose_support import HOST_GID, HOST_UID, PROJECT, compose_argv
from support import REPO

pytestmark = pytest.mark.integration
PROFILING_CAPS = {"SYS_ADMIN", "PERFMON", "SYS_PTRACE"}


def run_json(docker_client, service, *command):
    out = docker_client.compose.run(service, list(command), remove=True, tty=False)
    return json.loads(out)


def only_run_dir(traces):
    runs = [p for p in traces.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def assert_complete_and_owned(run, service):
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["service"] == service and manifest["status"] == "ok", manifest.get("message")
    for name in ("manifest.json", "env.json", "summary.json", "stdout.log", "stderr.log"):
        assert (run / name).is_file(), name
    env = json.loads((run / "env.json").read_text())
    assert env["host"]["in_container"] is True
    assert manifest["perfetto_trace"] and (run / manifest["perfetto_trace"]).is_file()
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [run, *run.rglob("*")]}
    assert owners == {(HOST_UID, HOST_GID)}, owners
    return manifest


@pytest.mark.parametrize("service, granted", [("env-check", set()), ("profile", set()),
                                              ("trace", set()), ("counters", {"SYS_ADMIN", "SYS_PTRACE"})])
def test_env_check_in_each_service_reports_exactly_its_grants(docker_client, traces, service, granted):
    report = run_json(docker_client, service, "env-check", "--json")
    assert report["host"]["in_container"] is True
    assert set(report["host"]["effective_capabilities"]) & PROFILING_CAPS == granted
    assert report["host"]["uid"] == (0 if service == "counters" else HOST_UID)  # only counters needs root
    assert report["gpus"] == [] and report["capabilities"]["timing"]["available"]


def test_env_check_service_default_command(docker_client, traces):
    out = docker_client.compose.run("env-check", remove=True, tty=False)
    assert "Capabilities" in out and "no GPU found" in out


def test_profile_service_leaves_a_complete_host_owned_run(docker_client, traces):
    docker_client.compose.run("profile", remove=True, tty=False)
    manifest = assert_complete_and_owned(only_run_dir(traces), "profile")
    assert manifest["backend"] == "timing" and manifest["workload_source"] == "default"
    assert manifest["workload"][-1] == "/workspace/profiling/workloads/matmul.py"


def test_trace_service_leaves_a_perfetto_trace(docker_client, traces):
    docker_client.compose.run("trace", remove=True, tty=False)
    manifest = assert_complete_and_owned(only_run_dir(traces), "trace")
    trace = json.loads((only_run_dir(traces) / manifest["perfetto_trace"]).read_text())
    assert trace["traceEvents"]


def test_counters_service_falls_back_as_documented(docker_client, traces):
    docker_client.compose.run("counters", remove=True, tty=False)
    manifest = assert_complete_and_owned(only_run_dir(traces), "counters")
    assert manifest["backend"] == "timing"
    assert any("no GPU found" in f["reason"] for f in manifest["fallbacks"])


def test_counters_without_fallback_exits_3_with_the_reason(docker_client, traces):
    with pytest.raises(DockerException) as caught:
        docker_client.compose.run("counters", ["counters"], remove=True, tty=False)
    assert caught.value.return_code == 3
    assert "counters unavailable: no GPU found" in (caught.value.stderr or "")
    assert list(traces.iterdir()) == []


def test_workload_from_the_environment(docker_client, traces, monkeypatch):
    monkeypatch.setenv("PROFILECTL_WORKLOAD", "python3 -c 'print(\"hello from the env\")'")
    docker_client.compose.run("profile", ["profile", "--repeat", "1"], remove=True, tty=False)
    run = only_run_dir(traces)
    assert "hello from the env" in (run / "stdout.log").read_text()
    assert json.loads((run / "manifest.json").read_text())["workload_source"] == "environment"


def test_docker_stop_marks_the_run_interrupted(docker_client, traces):
    name = f"{PROJECT}-stop"
    process = subprocess.Popen(compose_argv("run", "--rm", "--name", name, "profile", "profile", "--repeat", "1",
                                            "--warmup", "0", "--", "python3",
                                            "/workspace/profiling/workloads/matmul.py", "--seconds", "300"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not list(traces.glob("*/manifest.json")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        subprocess.run(["docker", "stop", "-t", "40", name], check=True, capture_output=True)
        assert process.wait(timeout=60) == 130
    finally:
        if process.poll() is None:
            process.kill()
    manifest = json.loads(next(traces.glob("*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    assert "SIGTERM" in manifest["message"]


def test_host_driver_runs_a_service_and_rejects_unknown_ones(docker_client, traces):
    env = dict(os.environ)
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "docker", "env-check", "--vendor", "none"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Capabilities" in done.stdout
    bad = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "docker", "frobnicate"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "unknown service" in bad.stderr


def test_missing_base_image_with_no_registry_is_one_line(docker_client, traces):
    env = dict(os.environ, PROFILECTL_BASE_IMAGE="profilectl-test/no-such-base:1", PROFILECTL_IMAGE="profilectl:never-built")
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "docker", "profile", "--vendor", "none"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "no registry" in last and "docker/offline-base/build.sh" in last


@pytest.mark.parametrize("override, expected", [("docker/compose.amd.yml", "/dev/kfd"),
                                                ("docker/compose.nvidia.yml", "driver: nvidia")])
def test_vendor_overrides_are_valid_compose_for_every_service(override, expected):
    done = subprocess.run(["docker", "compose", "-f", str(REPO / "docker-compose.profiling.yml"), "-f",
                           str(REPO / override), "config"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(expected) >= 4  # all four services get the grant
    assert "privileged: true" not in done.stdout


def test_messages_name_the_host_path_of_the_run(docker_client, traces):
    out = docker_client.compose.run("profile", ["profile", "--repeat", "1"], remove=True, tty=False)
    run = only_run_dir(traces)
    assert f"{traces}/{run.name}" in out.replace("\n", "")


@pytest.fixture
def app_dir(tmp_path, monkeypatch):
    """The user's project, mounted as the workload's working folder, owned by the host user."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "train.py").write_text("import os\nos.makedirs('out', exist_ok=True)\n"
                                  "open('out/result.txt', 'w').write('done')\nprint('trained as', os.getuid())\n")
    if os.geteuid() == 0:
        for path in (app, app / "train.py"):
            os.chown(path, HOST_UID, HOST_GID)
    monkeypatch.setenv("PROFILECTL_APP_DIR", str(app))
    return app


def owners(folder):
    return {(p.stat().st_uid, p.stat().st_gid) for p in [folder, *folder.rglob("*")]}


@pytest.mark.parametrize("service", ["trace", "counters"])
def test_the_readme_command_runs_a_program_under_the_service_and_leaves_only_user_files(docker_client, traces,
                                                                                        app_dir, service):
    """`docker compose ... run --rm trace -- python3 train.py`, as the README writes it (no service name
    repeated); trace runs as the user; counters starts as root and becomes the user before the workload
    starts, keeping no capability on a CPU (docs/threat-model.md): both leave only the user's files."""
    done = subprocess.run(compose_argv("run", "--rm", service, "--", "python3", "train.py"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = only_run_dir(traces)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["workload"] == ["python3", "train.py"]
    assert f"trained as {HOST_UID}" in (run / "stdout.log").read_text()
    assert (app_dir / "out" / "result.txt").read_text() == "done"
    assert owners(app_dir) == {(HOST_UID, HOST_GID)}  # the workload's files in the project: the user's
    assert owners(traces) == {(HOST_UID, HOST_GID)}


def test_a_program_without_dashes_and_service_options_first_also_work(docker_client, traces, app_dir):
    done = subprocess.run(compose_argv("run", "--rm", "profile", "python3", "train.py"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(compose_argv("run", "--rm", "profile", "--repeat", "1", "--warmup", "0", "--", "python3",
                                       "train.py"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads((run / "manifest.json").read_text())["steps"] for run in sorted(traces.iterdir())]
    sized, one = sorted((len(s) for s in steps), reverse=True)
    # the default sizes the timed runs to the workload (a warm-up, then 3 to 30 runs); --repeat 1 --warmup 0: one
    assert 4 <= sized <= 31 and one == 1, steps


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder that belongs to another user needs root")
def test_without_host_uid_a_traces_folder_docker_creates_still_belongs_to_the_user(docker_client, tmp_path,
                                                                                   app_dir, monkeypatch):
    """Plain `docker compose run` with no HOST_UID and no traces folder: the engine creates it as root;
    the container, started as root, gives it to the project's owner and runs as them."""
    missing = tmp_path / "new-traces"
    monkeypatch.setenv("PROFILECTL_TRACES_HOST_DIR", str(missing))
    for name in ("HOST_UID", "HOST_GID"):
        monkeypatch.delenv(name, raising=False)
    done = subprocess.run(compose_argv("run", "--rm", "trace", "--", "python3", "train.py"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert owners(missing) == {(HOST_UID, HOST_GID)}
    assert f"trained as {HOST_UID}" in (only_run_dir(missing) / "stdout.log").read_text()


def test_driver_creates_a_missing_traces_folder_as_the_user_and_refuses_a_missing_app_folder(tmp_path, monkeypatch):
    from profilectl import compose
    from profilectl.errors import UsageError
    monkeypatch.setenv("PROFILECTL_TRACES_HOST_DIR", str(tmp_path / "a" / "traces"))
    monkeypatch.delenv("PROFILECTL_APP_DIR", raising=False)
    made = compose.prepare_host_folders(REPO)
    assert made.is_dir() and made.stat().st_uid == os.getuid()
    monkeypatch.setenv("PROFILECTL_APP_DIR", str(tmp_path / "no-such-project"))
    with pytest.raises(UsageError, match="is not a folder"):
        compose.prepare_host_folders(REPO)


def test_every_privilege_is_in_the_readme_table():
    """What the compose files grant (capabilities, root, seccomp) is what the privilege table says
    (docs/containers.md, linked from the README)."""
    readme = (REPO / "docs/containers.md").read_text()
    table = {line.split("|")[1].strip(" `"): line.split("|")[-2] for line in readme.splitlines()
             if line.startswith("| `") and line.count("|") >= 4}
    for service in ("env-check", "profile", "trace", "counters"):
        assert service in table, service
    assert "SYS_ADMIN" in table["counters"] and "root" in table["counters"]
    assert all("root" not in table[s] and "SYS_" not in table[s] for s in ("env-check", "profile", "trace"))
    assert "seccomp=unconfined" in readme and "seccomp=unconfined" in (REPO / "docker/compose.amd.yml").read_text()
