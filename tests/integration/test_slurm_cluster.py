"""A real SLURM cluster (docker/slurm/: slurmctld + node1 + node2, MUNGE) on this machine's Docker engine.

One cluster per session, started by docker/slurm/cluster.sh under this session's own name (so a
second copy of the suite on the same engine has a cluster of its own) and removed at the end. Its
shared /workspace/traces is a temporary host folder, so every file a job writes is read here from
the host. Real daemons, real jobs, real `docker stop`: no mocks.
"""

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from compose_support import CLUSTER, HOST_GID, HOST_UID, REPO

CLUSTER_SH = REPO / "docker/slurm/cluster.sh"
NODES = ("node1", "node2")
CONTAINER = {"node1": f"{CLUSTER}-node1", "node2": f"{CLUSTER}-node2"}
SLURM_IMAGE_REPO = "profilectl-slurm-it"  # tagged by its inputs: shared by sessions of the same tree
IDLE = {"node1": "idle", "node2": "idle"}

pytestmark = [pytest.mark.integration, pytest.mark.slurm]


class Cluster:
    def __init__(self, traces: Path, env: dict):
        self.traces, self.env = traces, env
        self.name = env["PROFILECTL_CLUSTER_NAME"]

    def sh(self, *args, timeout=180, check=True):
        """cluster.sh ARGS...; returns the CompletedProcess (stdout and stderr as text)."""
        proc = subprocess.run([str(CLUSTER_SH), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"cluster.sh {' '.join(args)} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def run(self, *command, timeout=120, check=True):
        """A command in the controller (srun, sbatch, sinfo...)."""
        return self.sh("exec", *command, timeout=timeout, check=check)

    def node_states(self):
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout
        return dict(line.split() for line in sorted(set(out.splitlines())))

    def job(self, job_id):
        """scontrol show job as a dict (JobState, Reason, ExitCode, NodeList...)."""
        out = self.run("scontrol", "show", "job", "-o", str(job_id)).stdout
        return dict(field.split("=", 1) for field in out.split() if "=" in field)

    def docker_objects(self):
        """Every container, network and volume of this cluster's compose project."""
        label = f"label=com.docker.compose.project={self.name}"
        found = []
        for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
            out = subprocess.run(["docker", *kind, "-q", "--filter", label], capture_output=True, text=True).stdout
            found += out.split()
        return found


def wait_for(what, probe, timeout, interval=0.5):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def owners(folder):
    return {(p.stat().st_uid, p.stat().st_gid) for p in [folder, *folder.rglob("*")]}


@contextlib.contextmanager
def started_cluster(name, traces, image):
    """A cluster of this name on the project image, up until the block ends, then removed with its
    containers, network and volumes (only its own: nothing another name started is touched)."""
    env = dict(os.environ, PROFILECTL_CLUSTER_NAME=name, PROFILECTL_CLUSTER_TRACES=str(traces),
               PROFILECTL_IMAGE=image, PROFILECTL_SLURM_IMAGE_REPO=SLURM_IMAGE_REPO,
               HOST_UID=str(HOST_UID), HOST_GID=str(HOST_GID))
    env.pop("PROFILECTL_SLURM_IMAGE", None)
    c = Cluster(traces, env)
    # the traces folder is the user's, as a user's own folder mounted into the cluster is: jobs run as
    # root for that user become the user (least privilege) and must be able to write there
    os.chown(traces, HOST_UID, HOST_GID)
    start = time.monotonic()
    try:
        up = c.sh("up", timeout=1200)  # builds the node image only if none of the same inputs exists
        print(f"\nslurm cluster {name}: up in {time.monotonic() - start:.1f} s; "
              f"{next(line for line in up.stdout.splitlines() if ' up in ' in line)}")
        yield c
    finally:
        # jobs run as root: what they wrote in the shared folder goes back to the user (who must be
        # able to delete it), then the cluster goes
        c.sh("exec", "chown", "-R", f"{HOST_UID}:{HOST_GID}", "/workspace/traces", timeout=60, check=False)
        c.sh("down", timeout=120, check=False)


@pytest.fixture(scope="session")
def cluster(project_image, tmp_path_factory):
    with started_cluster(CLUSTER, tmp_path_factory.mktemp("slurm-traces"), project_image) as c:
        yield c


def test_sinfo_shows_two_idle_nodes(cluster):
    assert cluster.node_states() == IDLE
    cpus = cluster.run("sinfo", "-h", "-N", "-o", "%N %c").stdout.split()
    assert cpus == ["node1", "2", "node2", "2"]


def test_srun_puts_two_tasks_on_each_node(cluster):
    out = cluster.run("srun", "-N2", "-n4", "hostname").stdout
    assert sorted(out.split()) == ["node1", "node1", "node2", "node2"]
    # block distribution: ranks 0-1 on the first node, 2-3 on the second, as SLURM tells each task
    out = cluster.run("srun", "-N2", "-n4", "sh", "-c",
                      'echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $(hostname)').stdout
    tasks = sorted(tuple(line.split()) for line in out.splitlines())
    assert tasks == [("0", "0", "0", "node1", "node1"), ("1", "1", "0", "node1", "node1"),
                     ("2", "0", "1", "node2", "node2"), ("3", "1", "1", "node2", "node2")]


def test_ddp_job_on_four_ranks_writes_one_file_per_rank_on_the_host(cluster):
    out = cluster.run("srun", "-N2", "-n4", "--time=5", "python3", "/opt/slurm-cluster/ddp_job.py",
                      "--steps", "5", "--out", "/workspace/traces/ddp", timeout=180).stdout
    assert sum("done 5 steps" in line for line in out.splitlines()) == 4, out
    records = [json.loads((cluster.traces / "ddp" / f"rank{r}.json").read_text()) for r in range(4)]
    assert [(r["rank"], r["host"], r["slurmd_nodename"], r["world_size"]) for r in records] == [
        (0, "node1", "node1", 4), (1, "node1", "node1", 4), (2, "node2", "node2", 4), (3, "node2", "node2", 4)]
    assert {(r["status"], r["step"], r["allreduce_sum"], r["master"].split(":")[0]) for r in records} == {
        ("done", 5, 10.0, "node1")}  # 1+2+3+4 over the 4 ranks, rendezvous on the first node
    assert len({r["job_id"] for r in records}) == 1
    assert len({r["param_checksum"] for r in records}) == 1  # DDP kept the 4 replicas identical
    assert len({r["loss"] for r in records}) == 4  # while each rank trained on its own batches


def test_mpi_allreduce_across_nodes(cluster):
    out = cluster.run("srun", "--mpi=pmix", "-N2", "-n4", "python3", "-c",
                      "from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
                      "print(c.rank, c.size, socket.gethostname(), c.allreduce(c.rank + 1))").stdout
    assert sorted(tuple(line.split()) for line in out.splitlines()) == [
        ("0", "4", "node1", "10"), ("1", "4", "node1", "10"), ("2", "4", "node2", "10"), ("3", "4", "node2", "10")]


def test_profilectl_runs_as_an_srun_task_on_each_node(cluster):
    cluster.run("srun", "-N2", "--ntasks-per-node=1", "--output=/workspace/traces/env-check-%N.json",
                "profilectl", "env-check", "--json")
    for node in NODES:
        report = json.loads((cluster.traces / f"env-check-{node}.json").read_text())
        assert node in json.dumps(report)


def test_stopping_a_node_fails_the_job_and_keeps_the_other_nodes_files(cluster):
    out_dir = cluster.traces / "node-failure"
    out_dir.mkdir()  # slurmstepd does not create the folder of --output: the job would fail at once
    job_id = cluster.run("sbatch", "--parsable", "--output=/workspace/traces/node-failure/slurm-%j.out",
                         "/opt/slurm-cluster/ddp.sbatch", "--steps", "10000", "--step-seconds", "0.2",
                         "--out", "/workspace/traces/node-failure").stdout.strip()

    def ranks():
        try:
            return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(4)]
        except (FileNotFoundError, json.JSONDecodeError):  # not written yet (files are replaced atomically)
            return None

    def running_ranks():
        state = cluster.job(job_id)["JobState"]
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), f"job {job_id} {state} before the node was stopped"
        r = ranks()
        return r if r and min(x["step"] for x in r) >= 3 else None

    wait_for("all 4 ranks to pass step 3", running_ranks, 120)
    try:
        subprocess.run(["docker", "stop", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
        stopped = time.monotonic()
        job = wait_for("the job to end", lambda: (j := cluster.job(job_id))["JobState"] not in
                       ("RUNNING", "COMPLETING", "PENDING") and j, 90)
        node2 = wait_for("node2 to be DOWN", lambda: cluster.node_states().get("node2", "").startswith("down")
                         and cluster.run("scontrol", "show", "node", "node2").stdout, 90)
        failed_after = time.monotonic() - stopped
        log = (out_dir / f"slurm-{job_id}.out").read_text()
        print(f"\n{failed_after:.1f} s after docker stop: JobState={job['JobState']} Reason={job['Reason']} "
              f"ExitCode={job['ExitCode']}\nnode2: {' '.join(node2.split())}\nbatch output:\n{log}")
        assert job["JobState"] == "NODE_FAIL", job
        assert "Reason=Not responding" in node2 and "State=DOWN" in node2, node2
        # srun's word for it; slurmstepd's "CANCELLED ... DUE TO NODE FAILURE" line follows only when the
        # batch script is still running when slurmctld cancels it (srun often exits first)
        assert "srun: error: Node failure on node2" in log, log

        survivors = ranks()  # every file is still complete JSON, including the dead node's last ones
        assert survivors is not None
        for r in survivors[:2]:  # node1's ranks saw their gloo peers vanish, or were signalled by SLURM
            assert r["host"] == "node1" and r["step"] >= 3 and r["status"] in ("failed", "terminated"), r
        for r in survivors[2:]:  # node2's ranks were killed with their container: last state written
            assert r["host"] == "node2" and r["step"] >= 3 and r["status"] == "running", r
    finally:
        subprocess.run(["docker", "start", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
    # ReturnToService=2: the restarted slurmd registers and node2 is usable again, no admin step
    wait_for("node2 to return to idle", lambda: cluster.node_states() == IDLE, 60)
    assert sorted(cluster.run("srun", "-N2", "-n2", "hostname").stdout.split()) == ["node1", "node2"]


# ---------------------------------------------------------------- profilectl as every task of a job
DDP = ("python3", "/opt/slurm-cluster/ddp_job.py")
LOCAL_PROFILECTL = (str(REPO / ".venv/bin/python"), str(REPO / "tools/profilectl"))


def job_dirs(root, job_id):
    return sorted(root.glob(f"*-job{job_id}.*"))


def host_report(path, *args):
    """profilectl of this checkout, on the host, reading what the cluster wrote."""
    env = dict(os.environ, PROFILECTL_CACHE_DIR=str(path.parent / ".cache"), COLUMNS="200")
    return subprocess.run([*LOCAL_PROFILECTL, *args], capture_output=True, text=True, timeout=120, env=env)


def last_job_id(cluster):
    out = cluster.run("scontrol", "show", "jobs", "-o").stdout
    return max(int(line.split("JobId=")[1].split()[0]) for line in out.splitlines() if "JobId=" in line)


def test_srun_profilectl_trace_writes_one_job_folder_with_every_rank(cluster):
    """srun -N2 -n4 profilectl trace -- python3 ddp_job.py: one job folder, a complete run per rank
    from both nodes, job.json, and a merged report and listing read on the host."""
    done = cluster.run("srun", "-N2", "-n4", "profilectl", "trace", "--", *DDP, "--steps", "3", "--out", "/tmp/ddp",
                       timeout=240)
    job_id = last_job_id(cluster)
    [job] = job_dirs(cluster.traces, job_id)
    assert job.name.endswith(f"-trace-job{job_id}.0")
    assert sorted(p.name for p in job.iterdir() if p.is_dir()) == [
        "node1-rank0", "node1-rank1", "node2-rank2", "node2-rank3"]
    for rank_dir in (p for p in job.iterdir() if p.is_dir()):
        manifest = json.loads((rank_dir / "manifest.json").read_text())
        assert manifest["status"] == "ok" and manifest["controller"]["hostname"] == rank_dir.name.split("-")[0]
        assert list((rank_dir / "raw").glob("*.pt.trace.json")), rank_dir
    manifest = json.loads((job / "job.json").read_text())
    assert (manifest["job_id"], manifest["step_id"], manifest["ntasks"], manifest["nodes"], manifest["status"]) == (
        str(job_id), "0", 4, ["node1", "node2"], "ok")
    assert [(r["rank"], r["host"], r["status"]) for r in manifest["ranks"]] == [
        (0, "node1", "ok"), (1, "node1", "ok"), (2, "node2", "ok"), (3, "node2", "ok")]
    # one voice: rank 0 prints its tables and the job's line, the other ranks a line each
    assert done.stderr.count(f"job {job_id}.0: ok: 4 ranks on 2 node(s), all ok") == 1, done.stderr
    assert sum(line.startswith("rank ") and " ok trace via torch" in line for line in done.stdout.splitlines()) == 3

    assert owners(job) == {(HOST_UID, HOST_GID)}  # tasks run as root; the job folder is the user's
    report = host_report(job, "report", str(job), "--format", "json")
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["job"]["status"] == "ok" and summary["job"]["nodes"] == ["node1", "node2"]
    assert [(r["rank"], r["host"], r["basis"]) for r in summary["ranks"]] == [
        ("0", "node1", "cpu"), ("1", "node1", "cpu"), ("2", "node2", "cpu"), ("3", "node2", "cpu")]
    # gloo's collective is a record_function range (user_annotation): an annotation, kept per rank
    allreduce = [a for a in summary["annotations"] if a["name"] == "gloo:all_reduce"]
    assert sorted(a["rank"] for a in allreduce) == ["0", "1", "2", "3"]  # the job's table holds every rank's
    assert all(a["calls"] >= 3 for a in allreduce)
    assert summary["kernel_time_spread"]["basis"] == "cpu"
    table = host_report(job, "report", str(job))
    assert f"SLURM job {job_id}.0 — ok" in table.stdout, table.stdout
    assert "CPU time in operators per rank: rank" in table.stdout, table.stdout  # the spread, relative to the fastest
    listing = json.loads(host_report(job, "ls", str(cluster.traces), "--json").stdout)
    entry = next(run for run in listing if run["run"] == job.name)
    assert entry["status"] == "ok" and "4 ranks on node1, node2" in entry["workload"]


def test_sbatch_example_profiles_every_rank_and_writes_the_report(cluster):
    """examples/slurm/profile.sbatch, as a user submits it: the job folder and its report.md."""
    job_id = cluster.run("sbatch", "--parsable", "--wait", "--output=/workspace/traces/slurm-%j.out",
                         "/opt/examples/slurm/profile.sbatch", *DDP, "--steps", "3", "--out", "/tmp/ddp",
                         timeout=300).stdout.strip()
    [job] = job_dirs(cluster.traces, job_id)
    assert len([p for p in job.iterdir() if p.is_dir()]) == 4
    report = (job / "report.md").read_text()
    assert f"SLURM job {job_id}.0" in report and "node1" in report and "node2" in report, report
    # the job runs as root: everything it left in the user's folder is handed back, its log too
    assert owners(job) == {(HOST_UID, HOST_GID)}
    log = cluster.traces / f"slurm-{job_id}.out"
    assert (log.stat().st_uid, log.stat().st_gid) == (HOST_UID, HOST_GID)


def test_sbatch_example_with_node_local_scratch_copies_every_rank_back(cluster):
    """PROFILECTL_SCRATCH: ranks write to each node's own /tmp, each node copies its ranks back."""
    job_id = cluster.run("env", "PROFILECTL_SCRATCH=/tmp", "sbatch", "--parsable", "--wait",
                         "--output=/workspace/traces/slurm-%j.out", "/opt/examples/slurm/profile.sbatch", *DDP,
                         "--steps", "3", "--out", "/tmp/ddp", timeout=300).stdout.strip()
    log = (cluster.traces / f"slurm-{job_id}.out").read_text()
    assert "not shared" not in log, log  # node-local on purpose: no false alarm
    [job] = job_dirs(cluster.traces, job_id)
    assert sorted(p.name for p in job.iterdir() if p.is_dir()) == [
        "node1-rank0", "node1-rank1", "node2-rank2", "node2-rank3"]
    assert owners(job) == {(HOST_UID, HOST_GID)}  # copied back from scratch, still the user's
    report = host_report(job, "report", str(job), "--format", "json")
    assert json.loads(report.stdout)["job"]["status"] == "ok", report.stdout
    for node in NODES:  # scratch emptied
        left = subprocess.run(["docker", "exec", CONTAINER[node], "sh", "-c", f"ls /tmp/profilectl-{job_id}"],
                              capture_output=True, text=True)
        assert left.stdout.strip() == "", left.stdout


def test_a_traces_folder_not_shared_between_nodes_is_said(cluster):
    """--traces-dir on each node's own /tmp: each node's folder holds half the ranks, and says why."""
    done = cluster.run("env", "PROFILECTL_JOB_WAIT_S=2", "srun", "-N2", "-n4", "profilectl", "trace",
                       "--traces-dir", "/tmp/unshared", "--", *DDP, "--steps", "2", "--out", "/tmp/ddp", timeout=240)
    job_id = last_job_id(cluster)
    lines = [line for line in done.stderr.splitlines() if f"job {job_id}.0: incomplete" in line]
    assert len(lines) == 2, done.stderr  # the first rank seen on each node says it
    assert "rank(s) 2-3 left no run" in " ".join(lines) and "not shared between the nodes" in " ".join(lines)
    on_node2 = subprocess.run(["docker", "exec", CONTAINER["node2"], "sh", "-c",
                               f"cat /tmp/unshared/*-job{job_id}.0/job.json"], capture_output=True, text=True)
    manifest = json.loads(on_node2.stdout)
    assert manifest["status"] == "incomplete" and [r["rank"] for r in manifest["ranks"]] == [2, 3]


def test_bad_input_under_slurm_is_one_line(cluster):
    no_program = cluster.run("profilectl", "trace", "--", "srun", "-N2", "-n4", check=False)
    assert no_program.returncode == 2
    assert no_program.stderr.strip().splitlines() == [
        "profilectl: srun with no program after it: put the program each rank runs after the launcher's "
        "options (e.g. srun ... python3 train.py)"]


def test_a_node_lost_mid_job_is_named_and_the_other_ranks_are_kept(cluster):
    """docker stop of node2 while every rank is profiled: node1's ranks end with their runs complete
    and a job.json that names the lost node; the report on the host says the same."""
    out_dir = cluster.traces / "lost-node"
    out_dir.mkdir()
    os.chown(out_dir, HOST_UID, HOST_GID)  # the ranks run as the user and write their records here
    job_id = cluster.run("sbatch", "--parsable", "--output=/workspace/traces/slurm-%j.out",
                         "/opt/examples/slurm/profile.sbatch", *DDP, "--steps", "10000", "--step-seconds", "0.2",
                         "--out", "/workspace/traces/lost-node").stdout.strip()

    def stepping():
        try:
            records = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(4)]
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return min(r["step"] for r in records) >= 3

    wait_for("all 4 ranks to pass step 3", stepping, 120)
    try:
        subprocess.run(["docker", "stop", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
        wait_for("the job to end", lambda: cluster.job(job_id)["JobState"] not in ("RUNNING", "COMPLETING"), 120)
        [job] = job_dirs(cluster.traces, job_id)

        def final():
            try:
                manifest = json.loads((job / "job.json").read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                return None
            return manifest if manifest["status"] == "failed" else None
        manifest = wait_for("node1's ranks to write job.json", final, 60)
        print(f"\njob.json: {manifest['message']}")
        assert "ranks 2-3: node node2 lost" in manifest["message"], manifest
        assert {(r["rank"], r["status"]) for r in manifest["ranks"] if r["host"] == "node2"} == {
            (2, "lost"), (3, "lost")}
        for rank in (0, 1):  # node1's ranks: complete runs, their traces kept
            rank_dir = job / f"node1-rank{rank}"
            assert json.loads((rank_dir / "manifest.json").read_text())["status"] in ("failed", "interrupted")
            assert list((rank_dir / "raw").glob("*.pt.trace.json")), rank_dir
        report = json.loads(host_report(job, "report", str(job), "--format", "json").stdout)
        assert "ranks 2-3: node node2 lost" in report["job"]["message"]  # composed afresh from the ranks
        assert [(r["rank"], r["status"]) for r in report["ranks"]] == [
            ("0", r0 := report["ranks"][0]["status"]), ("1", report["ranks"][1]["status"]), ("2", "lost"), ("3", "lost")]
        assert r0 in ("failed", "interrupted")
    finally:
        subprocess.run(["docker", "start", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
    wait_for("node2 to return to idle", lambda: cluster.node_states() == IDLE, 60)


def test_profilectl_cluster_command_drives_the_same_cluster(cluster):
    done = subprocess.run([*LOCAL_PROFILECTL, "cluster", "exec", "--", "srun", "-N2", "-n2", "hostname"],
                          env=cluster.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and sorted(done.stdout.split()) == ["node1", "node2"], done.stderr
    status = subprocess.run([*LOCAL_PROFILECTL, "cluster", "status"], env=cluster.env, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0 and "idle" in status.stdout


def test_a_second_cluster_beside_this_one_leaves_it_alone(cluster, project_image, tmp_path):
    """Another copy of the suite's cluster fixture (as a second test session on this engine starts
    it): its own containers, network, volumes, MUNGE key and traces folder; a job in each lands in
    its own folder; removing it leaves this one up and working, and nothing of it behind."""
    other_traces = tmp_path / "other-traces"
    other_traces.mkdir()
    with started_cluster(f"{CLUSTER}-b", other_traces, project_image) as other:
        assert other.name != cluster.name and other.node_states() == IDLE and cluster.node_states() == IDLE
        assert not set(other.docker_objects()) & set(cluster.docker_objects())
        for c in (cluster, other):
            c.run("srun", "-N2", "-n2", "sh", "-c", f"echo {c.name} > /workspace/traces/side-by-side-$(hostname)")
        for c in (cluster, other):
            written = {p.name: p.read_text().strip() for p in c.traces.glob("side-by-side-*")}
            assert written == {"side-by-side-node1": c.name, "side-by-side-node2": c.name}
    assert other.docker_objects() == []  # its containers, network and volumes are gone
    assert owners(other_traces) == {(HOST_UID, HOST_GID)}
    assert cluster.node_states() == IDLE  # this session's cluster was not touched
    assert sorted(cluster.run("srun", "-N2", "-n2", "hostname").stdout.split()) == ["node1", "node2"]


def test_report_on_cluster_reduces_on_each_node_and_names_a_node_that_is_down(cluster, tmp_path):
    """Ranks write to each node's own /tmp (node-local scratch, no copy back): `report --on-cluster`
    from the controller, which holds none of the files, runs one srun step per node that reduces that
    node's ranks where they lie, and merges; the numbers equal a raw read of every rank's files.
    Then node2 is stopped: it is named, node1's ranks' numbers are kept."""
    scratch = f"/tmp/scratch-{os.getpid()}"
    cluster.run("env", "PROFILECTL_JOB_SCRATCH=1", "srun", "-N2", "-n4", "profilectl", "trace", "--traces-dir",
                scratch, "--", *DDP, "--steps", "4", "--out", "/tmp/ddp", timeout=240)
    job_id = last_job_id(cluster)
    listed = subprocess.run(["docker", "exec", CONTAINER["node1"], "sh", "-c", f"ls -d {scratch}/*-job{job_id}.*"],
                            capture_output=True, text=True, check=True).stdout.split()
    [job] = listed
    for node, ranks in (("node1", ("node1-rank0", "node1-rank1")), ("node2", ("node2-rank2", "node2-rank3"))):
        here = subprocess.run(["docker", "exec", CONTAINER[node], "ls", job], capture_output=True, text=True,
                              check=True).stdout.split()
        assert set(ranks) <= set(here) and not any(r in here for r in ("node1-rank0", "node2-rank2")
                                                     if not r.startswith(node)), here
        assert "partial.json" in subprocess.run(["docker", "exec", CONTAINER[node], "ls", f"{job}/{ranks[0]}"],
                                                   capture_output=True, text=True).stdout  # written as it ended
    assert subprocess.run(["docker", "exec", f"{CLUSTER}-ctld", "test", "-e", job]).returncode != 0

    dry = cluster.run("profilectl", "report", job, "--on-cluster", "--nodes", "node1,node2", "--dry-run").stdout
    assert [line.split()[:5] for line in dry.splitlines()] == [
        ["srun", "--job-name=profilectl-reduce", "--nodes=1", "--ntasks=1", f"--nodelist={n}"] for n in NODES]
    done = cluster.run("profilectl", "report", job, "--on-cluster", "--nodes", "node1,node2", "--format", "json",
                       timeout=300)
    merged = json.loads(done.stdout)
    print(f"\non-cluster notes: {merged['notes'][:3]}")
    assert any(n.startswith("reduced on node1: 2 rank(s)") for n in merged["notes"]), merged["notes"]
    assert any(n.startswith("reduced on node2: 2 rank(s)") for n in merged["notes"]), merged["notes"]
    assert merged["job"]["nodes"] == ["node1", "node2"] and merged["job"]["status"] == "ok", merged["job"]
    assert [(r["rank"], r["host"]) for r in merged["ranks"]] == [
        ("0", "node1"), ("1", "node1"), ("2", "node2"), ("3", "node2")]

    # the same job read the slow way: every rank's raw files brought together here
    whole = tmp_path / Path(job).name
    whole.mkdir()
    for node in NODES:
        subprocess.run(["docker", "cp", f"{CONTAINER[node]}:{job}/.", str(whole)], check=True, capture_output=True)
    raw = json.loads(host_report(whole, "report", str(whole), "--format", "json", "--raw").stdout)
    for table in ("kernels", "operators", "api", "annotations", "ranks"):
        assert merged[table] == raw[table], table
    assert merged["operators"] and merged["diagnosis"] == raw["diagnosis"]

    try:
        subprocess.run(["docker", "stop", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
        wait_for("node2 to be DOWN", lambda: cluster.node_states().get("node2", "").startswith("down"), 120)
        started = time.monotonic()
        down = cluster.run("profilectl", "report", job, "--on-cluster", "--nodes", "node1,node2", "--format",
                           "json", timeout=300)
        print(f"with node2 down: {time.monotonic() - started:.1f} s; {json.loads(down.stdout)['job']['message']}")
        report = json.loads(down.stdout)
        assert report["job"]["status"] == "failed" and report["job"]["message"].startswith("node node2 not reached")
        assert "rank(s) 2-3 not reduced" in report["job"]["message"], report["job"]["message"]
        assert any(n.startswith("reduced on node1: 2 rank(s)") for n in report["notes"])
        assert [(r["rank"], r["host"]) for r in report["ranks"]] == [("0", "node1"), ("1", "node1")]
        def all_reduce_ranks(summary):  # annotations are kept per rank
            return sorted(a["rank"] for a in summary["annotations"] if a["name"] == "gloo:all_reduce")
        assert all_reduce_ranks(report) == ["0", "1"] and all_reduce_ranks(raw) == ["0", "1", "2", "3"]
    finally:
        subprocess.run(["docker", "start", CONTAINER["node2"]], check=True, capture_output=True, timeout=60)
    wait_for("node2 to return to idle", lambda: cluster.node_states() == IDLE, 90)
