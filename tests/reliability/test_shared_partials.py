"""Partials that prove where they came from. A folder of partials can be someone else's (shared), a
node's `--on-cluster` step can say anything, a raw file can be rewritten behind a partial's back, and
a partial.json can be anything at all:
- a shared folder of partials whose `folder` names a root-only folder elsewhere: root's `report` of it
  reads nothing there and writes nothing back (a real user's folder, root's secret kernel names);
- a node claiming another node's rank and a rank that never ran (real `report --reduce-here` steps
  through a stand-in srun): its claims are refused and named, the real ranks' numbers kept;
- a raw file rewritten with the same size and mtime: the partial is rebuilt, not trusted;
- partial.json deeply nested, a fifo, a link to /dev/zero, or larger than memory allows: one line,
  the rank rebuilt from its raw files, no hang, no traceback;
- a node's answer of hundreds of MB is streamed, not held whole."""

from __future__ import annotations

import base64
import csv
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from attacker import as_user, reachable_folder, users_folder
from support import REPO

FIXTURES = REPO / "tests/fixtures"
STRAGGLER = FIXTURES / "diagnosis/straggler"
JOB = "20261125T100000Z-trace-job42.0"


@pytest.fixture
def base():
    with reachable_folder("profilectl-partials-") as folder:
        yield folder


def rocprofv3_folder(root: Path, kernel_prefix: str, processes=(("node1", 111), ("node1", 112))) -> Path:
    """rocprofv3's kernel traces, one per process, every kernel's name starting with `kernel_prefix`."""
    with (FIXTURES / "rocprofv3-docs" / "kernel_trace.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows, columns = list(reader), reader.fieldnames
    for host, pid in processes:
        (root / host).mkdir(parents=True, exist_ok=True)
        with (root / host / f"{pid}_kernel_trace.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, quoting=csv.QUOTE_ALL)
            writer.writeheader()
            for row in rows:
                writer.writerow({**row, "Kernel_Name": kernel_prefix + row["Kernel_Name"]})
    return root


def manifest() -> dict:
    return {"schema_version": 1, "profilectl_version": "0", "service": "trace", "backend": "torch",
            "reason": "torch.profiler in the workload", "fallbacks": [], "tool": None, "argv": [], "phases": [],
            "workload": ["python3", "ddp.py"], "workload_source": "argv", "counter_set": None, "gpu": None,
            "started_at": "2026-11-25T10:00:00Z", "finished_at": "2026-11-25T10:00:05Z", "wall_seconds": 5.0,
            "exit_code": 0, "status": "ok"}


def add_rank(job: Path, rank: int, host: str, like: int) -> Path:
    """A rank folder `<host>-rank<rank>` holding the straggler fixture's rank `like` files."""
    raw = job / f"{host}-rank{rank}" / "raw"
    raw.mkdir(parents=True)
    (raw.parent / "manifest.json").write_text(json.dumps(manifest()))
    for f in STRAGGLER.iterdir():
        if f"rank{like}-" in f.name or f"rank-{like}-" in f.name:
            shutil.copy2(f, raw / f.name)
    return raw


def cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), timeout=timeout)


# ---------------------------------------------------------------- a shared folder of partials
def test_a_shared_folder_of_partials_reads_nothing_it_names_elsewhere(user, base, harness):
    """The user shares a folder of partials; one names a root-only folder as the one it was made
    from. Before: root's report read that folder (root's kernel names in the user's report) and wrote
    what it found back into the shared folder. Now: nothing there is read, nothing written back, one
    line says so, the partial's own numbers are used."""
    secret = rocprofv3_folder(base / "root-only" / "out", "rootsecret_")
    (base / "root-only").chmod(0o700)
    shared = users_folder(base, "shared", user)
    decoy = rocprofv3_folder(base / "decoy", "decoy_")
    made = harness.run("report", str(decoy), "--reduce-here", "-o", str(shared))
    assert made.returncode == 0, made.stderr
    for path in shared.iterdir():  # the user's own partials, pointing at root's folder
        data = json.loads(path.read_text())
        data["folder"] = str(secret)
        path.write_text(json.dumps(data))
        os.chown(path, *user)
    shutil.rmtree(decoy)
    before = {p.name: p.read_bytes() for p in shared.iterdir()}
    done = harness.run("report", str(shared), "--format", "json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "rootsecret_" not in done.stdout, "root read the folder a shared partial named"
    report = json.loads(done.stdout)
    assert report["kernels"] and all(k["name"].startswith("decoy_") for k in report["kernels"])
    assert any("outside" in n and str(secret) in n for n in report["notes"]), report["notes"]
    assert {p.name: p.read_bytes() for p in shared.iterdir()} == before  # nothing written back


# ---------------------------------------------------------------- a node's claims
FAKE_SRUN = textwrap.dedent("""\
    #!PYTHON
    # srun's stand-in: the step runs here, as on the node --nodelist names, against that node's own copy
    # of the job folder ($FAKE_NODES/<node>/<job>); FAKE_PAD pads every partial it sends (a node with
    # large partials)
    import base64, json, os, subprocess, sys
    args = sys.argv[1:]
    node = next(a.split("=", 1)[1] for a in args if a.startswith("--nodelist="))
    job = args[args.index("report") + 1]
    local = os.path.join(os.environ["FAKE_NODES"], node, os.path.basename(job))
    env = dict(os.environ, SLURMD_NODENAME=node)
    step = [sys.executable, "PROFILECTL", "report", local, "--reduce-here"]
    pad = int(os.environ.get("FAKE_PAD") or 0)
    # FAKE_CLAIM=node:rank:as_rank:as_host: that node also sends its rank's partial as another rank's
    claim = os.environ.get("FAKE_CLAIM", "").split(":")
    proc = subprocess.Popen(step, stdout=subprocess.PIPE, env=env)
    prefix = b"profilectl-partial "
    for line in proc.stdout:
        if line.startswith(prefix) and (pad or claim[0] == node):
            data = json.loads(base64.b64decode(line[len(prefix):]))
            data["padding"] = "x" * pad  # a field no reader knows: decoded past, as a large partial's
            line = prefix + base64.b64encode(json.dumps(data).encode()) + b"\\n"
            if claim[0] == node and data["rank"]["rank"] == int(claim[1]):
                data["rank"].update(rank=int(claim[2]), host=claim[3], run=f"{claim[3]}-rank{claim[2]}")
                sys.stdout.buffer.write(prefix + base64.b64encode(json.dumps(data).encode()) + b"\\n")
        sys.stdout.buffer.write(line)
    sys.stdout.flush()
    sys.exit(proc.wait())
""").replace("PYTHON", sys.executable).replace("PROFILECTL", str(REPO / "tools/profilectl"))


@pytest.fixture
def cluster(tmp_path, harness):
    """An srun stand-in on PATH and a folder of nodes, each with its own copy of the job folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN)
    srun.chmod(0o755)
    nodes = tmp_path / "nodes"
    harness.env = dict(harness.env, PATH=f"{bin_dir}{os.pathsep}{harness.env['PATH']}", FAKE_NODES=str(nodes))
    return nodes


def node_job(nodes: Path, node: str, ranks: dict[int, tuple[str, int]], ntasks: int) -> Path:
    """`node`'s copy of the job: rank -> (host, which fixture rank's files), and its job.json."""
    job = nodes / node / JOB
    for rank, (host, like) in ranks.items():
        add_rank(job, rank, host, like)
    (job / "job.json").write_text(json.dumps({
        "schema_version": 1, "job_id": "42", "step_id": "0", "service": "trace", "ntasks": ntasks,
        "nodes": sorted({h for h, _ in ranks.values()}), "ranks": [
            {"rank": r, "host": h, "status": "ok", "run": f"{h}-rank{r}", "exit_code": 0, "message": None}
            for r, (h, _) in sorted(ranks.items())], "status": "ok", "message": "", "cluster": None}))
    return job


def test_a_node_speaks_only_for_its_own_ranks(harness, cluster, tmp_path):
    """node1's folder also holds a planted `node2-rank1` (rank 0's files under node2's rank 1) and a
    `node1-rank7` that never ran (the job has 2 ranks). Before: node1 answered first and its claims
    won: rank 1's numbers were rank 0's and a rank 7 appeared. Now node1 reduces its own ranks only,
    and what it claims beyond them (its step also sends its rank 0's partial as rank 1 of node2) is
    refused and named; rank 1's numbers are node2's own."""
    harness.env = dict(harness.env, FAKE_CLAIM="node1:0:1:node2")
    node_job(cluster, "node1", {0: ("node1", 0), 1: ("node2", 0), 7: ("node1", 1)}, ntasks=2)
    node_job(cluster, "node2", {1: ("node2", 1)}, ntasks=2)
    genuine = tmp_path / "genuine" / JOB
    add_rank(genuine, 0, "node1", 0)
    add_rank(genuine, 1, "node2", 1)
    raw = json.loads(cli("report", str(genuine), "--raw", "--format", "json").stdout)
    done = harness.run("report", str(tmp_path / "here" / JOB), "--on-cluster", "--nodes", "node1,node2",
                       "--format", "json", timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    merged = json.loads(done.stdout)
    assert [(r["rank"], r["host"], r["total_ns"]) for r in merged["ranks"]] == \
        [(r["rank"], r["host"], r["total_ns"]) for r in raw["ranks"]], merged["notes"]
    notes = " ".join(merged["notes"])
    assert "node node1: rank 1 (node2) refused" in notes and "node node1: rank 7 (node1) refused" in notes, notes


def test_a_nodes_large_answer_is_streamed_not_held_whole(harness, cluster, tmp_path):
    """node1 sends 12 partials of ~25 MB each (300 MB of output). Before: its whole output was read
    into memory, then split, then decoded (~3x its size). Now each partial is decoded and spooled as
    it arrives: the report's memory grows by a few partials, not by the node's output."""
    ranks = {r: ("node1", r % 2) for r in range(12)}
    node_job(cluster, "node1", ranks, ntasks=12)
    probe = tmp_path / "maxrss"
    wrapper = ("import atexit, resource, runpy, sys\n"
               "where = sys.argv[1]\n"
               "atexit.register(lambda: open(where, 'w').write(str(resource.getrusage("
               "resource.RUSAGE_SELF).ru_maxrss)))\n"
               "sys.argv = [sys.argv[2]] + sys.argv[3:]\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")

    def peak_kib(pad: int) -> int:
        env = dict(harness.env, FAKE_PAD=str(pad))
        done = subprocess.run([sys.executable, "-c", wrapper, str(probe), str(REPO / "tools/profilectl"), "report",
                               str(tmp_path / "here" / JOB), "--on-cluster", "--nodes", "node1", "--format", "json"],
                              capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert len(json.loads(done.stdout)["ranks"]) == 12
        return int(probe.read_text())
    plain = peak_kib(0)
    padded = peak_kib(25_000_000)
    grown_mb = (padded - plain) / 1024
    print(f"peak memory of the report: {plain / 1024:.0f} MB, {padded / 1024:.0f} MB with a 300 MB answer")
    assert grown_mb < 120, f"the report grew by {grown_mb:.0f} MB for a node's 300 MB answer"


# ---------------------------------------------------------------- content, not only size and mtime
def rewrite_same_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


@pytest.mark.parametrize("layout", ["job", "bare"])
def test_a_raw_file_rewritten_with_its_size_and_mtime_is_read_again(harness, tmp_path, layout):
    """Before: a partial whose raw file was rewritten with the same size and mtime was trusted (the old
    kernel names reported). Now its content hash differs: rebuilt, the new names reported."""
    if layout == "job":
        path = tmp_path / JOB
        raw = add_rank(path, 0, "node1", 0)
        add_rank(path, 1, "node2", 1)
        trace = next(raw.glob("*.json.gz"))
        plain = trace.with_name(trace.name[:-3])  # a plain JSON trace: bytes can be swapped one for one
        plain.write_bytes(__import__("gzip").decompress(trace.read_bytes()))
        trace.unlink()
        old, new = b"ProfilerStep#", b"ProfilerStap#"
        target = plain
    else:
        path = rocprofv3_folder(tmp_path / "out", "k_")
        assert harness.run("report", str(path), "--reduce-here").returncode == 0
        target, old, new = path / "node1" / "111_kernel_trace.csv", b"k_divide_kernel", b"k_dividE_kernel"
    first = harness.run("report", str(path), "--format", "json")
    assert first.returncode == 0, first.stderr
    assert old.decode() in first.stdout
    rewrite_same_size_and_mtime(target, old, new)
    second = harness.run("report", str(path), "--format", "json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert new.decode() in second.stdout, "a partial of a rewritten file was trusted"
    assert any("stale" in n for n in report["notes"]), report["notes"]


# ---------------------------------------------------------------- partial.json as anything at all
def hostile(place: Path, kind: str) -> None:
    place.unlink(missing_ok=True)
    if kind == "nested":
        from profilectl.read.partials import SCHEMA
        place.write_bytes(b'{"schema_version": %d, "notes": ' % SCHEMA + b"[" * 200_000 + b"]" * 200_000 + b"}")
    elif kind == "fifo":
        os.mkfifo(place)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", place)
    elif kind == "huge":  # sparse: 5 GiB of nothing, more than the memory this report may take
        with open(place, "wb") as fh:
            fh.truncate(5 << 30)


def limited_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("kind", ["nested", "fifo", "dev-zero", "huge"])
@pytest.mark.parametrize("layout", ["job", "bare"])
def test_a_hostile_partial_is_one_line_and_the_rank_is_read_again(harness, tmp_path, kind, layout):
    if layout == "job":
        path = tmp_path / JOB
        add_rank(path, 0, "node1", 0)
        add_rank(path, 1, "node2", 1)
        assert harness.run("report", str(path), "--format", "json").returncode == 0  # partials made
        place = path / "node1-rank0" / "partial.json"
    else:
        path = rocprofv3_folder(tmp_path / "out", "k_")
        assert harness.run("report", str(path), "--reduce-here").returncode == 0
        place = next((path / "profilectl-partials").glob("*.partial.json"))
    assert place.is_file()
    hostile(place, kind)
    try:
        done = subprocess.run(harness.argv("report", str(path), "--format", "json"), capture_output=True, text=True,
                              env=harness.env, timeout=90, preexec_fn=limited_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"report hung on a partial that is a {kind}")
    assert done.returncode == 0 and "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["kernels"]
    said = [n for n in report["notes"] if str(place.name) in n]
    assert said and all("\n" not in n for n in said), report["notes"]
    if kind in ("fifo", "dev-zero"):
        mode = os.lstat(place).st_mode
        assert stat.S_ISFIFO(mode) or stat.S_ISLNK(mode) or stat.S_ISREG(mode)
