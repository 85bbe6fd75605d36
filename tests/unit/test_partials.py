"""A SLURM job's report from its ranks' partials (read/partials.py): the same numbers as reading
every rank's raw files, a stale, foreign-version or damaged partial rebuilt, a rank whose files are
gone named. The job is two real ranks of a gloo DDP run whose rank 1 is the straggler
(tests/fixtures/diagnosis/straggler: torch.profiler traces and status files from an H100 run)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl import jobs
from profilectl.read import on_cluster, partials
from profilectl.read.load import load_job
from support import REPO

STRAGGLER = REPO / "tests/fixtures/diagnosis/straggler"
HOSTS = {0: "node1", 1: "node2"}


def manifest(status: str = "ok") -> dict:
    return {"schema_version": 1, "profilectl_version": "0", "service": "trace", "backend": "torch",
            "reason": "torch.profiler in the workload", "fallbacks": [], "tool": None, "argv": [], "phases": [],
            "workload": ["python3", "ddp.py"], "workload_source": "argv", "counter_set": None, "gpu": None,
            "started_at": "2026-11-25T10:00:00Z", "finished_at": "2026-11-25T10:00:05Z", "wall_seconds": 5.0,
            "exit_code": 0, "status": status}


def make_job(root: Path, name: str = "20261125T100000Z-trace-job42.0") -> Path:
    """A job folder as `srun profilectl trace` leaves it: <host>-rank<R>/ with manifest.json and raw/."""
    job = root / name
    for rank, host in HOSTS.items():
        raw = job / f"{host}-rank{rank}" / "raw"
        raw.mkdir(parents=True)
        (raw.parent / "manifest.json").write_text(json.dumps(manifest()))
        for f in STRAGGLER.iterdir():
            if f"rank{rank}-" in f.name or f"rank-{rank}-" in f.name:
                shutil.copy2(f, raw / f.name)
    return job


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))


def comparable(summary) -> dict:
    data = summary.to_dict()
    data["job"].pop("updated_at")
    for key in ("notes", "cache_hit"):
        data.pop(key)
    return data


def test_merged_partials_equal_the_raw_read(tmp_path):
    job = make_job(tmp_path)
    raw = load_job(job, raw=True)
    first = load_job(job)  # no partial yet: each rank's is made and stored
    assert all((job / f"{h}-rank{r}" / partials.FILE).is_file() for r, h in HOSTS.items())
    merged = load_job(job)  # from the stored partials only
    assert "rank(s) read from raw files" in " ".join(first.notes) and not merged.notes
    assert comparable(merged) == comparable(raw) == comparable(first)
    # as the document prints them, too: 0 and 0.0 compare equal but do not print alike
    assert json.dumps(comparable(merged), sort_keys=True) == json.dumps(comparable(raw), sort_keys=True)
    # every figure a reader sees, named: kernels, operators, annotations, ranks and the straggler
    for table in ("kernels", "operators", "api", "memory_copies"):
        assert [dict(r.__dict__) for r in getattr(merged, table)] == [dict(r.__dict__) for r in getattr(raw, table)]
        assert getattr(merged, table), table
    assert merged.annotations == raw.annotations and merged.annotations
    assert [r.rank for r in merged.ranks] == ["0", "1"] and merged.ranks == raw.ranks
    assert merged.timeline == raw.timeline and merged.timeline is not None
    straggler = merged.diagnosis.stragglers.straggler
    assert straggler == raw.diagnosis.stragglers.straggler and straggler.rank == "1"
    assert merged.diagnosis.findings == raw.diagnosis.findings


def test_a_partial_of_changed_raw_files_is_stale_and_rebuilt(tmp_path):
    job = make_job(tmp_path)
    load_job(job)
    trace = next((job / "node2-rank1" / "raw").glob("*.json.gz"))
    os.utime(trace, ns=(trace.stat().st_atime_ns, trace.stat().st_mtime_ns + 1_000_000_000))
    rank = jobs.compose(job).ranks[1]
    result = partials.for_rank(job, rank)
    assert result.how == "rebuilt" and "rank 1 (node2): partial stale" in result.note
    assert partials.for_rank(job, rank).how == "partial"  # written back: fresh again


def test_a_rank_whose_files_are_gone_is_named_and_the_others_kept(tmp_path):
    job = make_job(tmp_path)
    raw = load_job(job, raw=True)
    shutil.rmtree(job / "node2-rank1" / "raw")
    summary = load_job(job)
    assert "rank 1 (node2): no raw files and no partial: its numbers are missing" in summary.notes
    rank0 = next(r for r in raw.ranks if r.rank == "0")  # one rank's numbers left: its totals
    # a rank's row is its kernel time (GPU time less copies: the ranks table's basis)
    assert (summary.totals.kernel_time_ns, summary.totals.dispatches) == (rank0.total_ns, rank0.dispatches)
    # the rank without numbers keeps its row and its status (a lost node's ranks are listed as lost)
    assert [(r.rank, r.dispatches, r.status) for r in summary.ranks] == [
        ("0", rank0.dispatches, rank0.status), ("1", 0, next(r for r in raw.ranks if r.rank == "1").status)]


def test_a_partial_outlives_its_raw_files_and_says_so(tmp_path):
    job = make_job(tmp_path)
    before = load_job(job)
    shutil.rmtree(job / "node2-rank1" / "raw")
    after = load_job(job)
    assert comparable(after) == comparable(before)
    assert any(n.startswith("rank 1 (node2): its raw files are gone; its numbers come from its partial")
               for n in after.notes)


def test_another_schema_version_is_rebuilt(tmp_path):
    job = make_job(tmp_path)
    load_job(job)
    place = job / "node1-rank0" / partials.FILE
    stored = partials.decode(place.read_bytes())
    place.write_bytes(partials.encode(dataclasses.replace(stored, schema_version=partials.SCHEMA + 1)))
    result = partials.for_rank(job, jobs.compose(job).ranks[0])
    assert result.how == "rebuilt"
    assert f"schema version {partials.SCHEMA + 1}, this profilectl reads {partials.SCHEMA}" in result.note
    assert partials.decode(place.read_bytes()).schema_version == partials.SCHEMA


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", None])
def test_a_damaged_partial_is_rebuilt_or_named_never_a_traceback(tmp_path, damage):
    job = make_job(tmp_path)
    load_job(job)
    place = job / "node1-rank0" / partials.FILE
    data = place.read_bytes()
    place.write_bytes(data[: len(data) // 2] if damage is None else damage)  # None: torn in the middle
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(job), "--format", "json"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    notes = json.loads(done.stdout)["notes"]
    assert any("not a profilectl partial" in n or "damaged partial" in n for n in notes), notes
    # and with its raw files gone too: the rank is named, the other's numbers kept
    place.write_bytes(b"\x00garbage")
    shutil.rmtree(job / "node1-rank0" / "raw")
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(job), "--format", "json"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert any(n.startswith("rank 0 (node1): no raw files and no partial: its numbers are missing (")
               for n in report["notes"]), report["notes"]
    assert report["totals"]["dispatches"] > 0 and report["job"]["ranks"][0]["rank"] == 0


def test_raw_option_reads_every_raw_file(tmp_path):
    job = make_job(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    runs = [json.loads(subprocess.run([sys.executable, "-m", "profilectl", "report", str(job), "--format", "json",
                                       *extra], capture_output=True, text=True, env=env, check=True).stdout)
            for extra in ((), ("--raw",))]
    for data in runs:
        data["job"].pop("updated_at")
        data.pop("notes"), data.pop("cache_hit")
        data.pop("sections")  # the document's overview repeats the notes; its findings stay compared
    assert runs[0] == runs[1]


def test_on_cluster_dry_run_shows_one_srun_step_per_node(tmp_path):
    job = make_job(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(job), "--on-cluster", "--dry-run"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"srun --job-name=profilectl-reduce --nodes=1 --ntasks=1 --nodelist={node} --immediate=30 "
        f"--kill-on-bad-exit=1 --quiet profilectl report {job} --reduce-here" for node in ("node1", "node2")]


def test_each_node_reduces_its_own_ranks_and_a_node_not_reached_is_named(tmp_path):
    """Node-local folders: node1's copy of the job holds rank 0 only, node2's rank 1 only. Each
    node's step output (the real --reduce-here, in a subprocess) is merged; then node2 does not
    answer (srun's words), and node1's numbers stay."""
    node1, node2 = make_job(tmp_path / "node1"), make_job(tmp_path / "node2")
    shutil.rmtree(node1 / "node2-rank1")
    shutil.rmtree(node2 / "node1-rank0")
    for folder, rank, host in ((node1, 0, "node1"), (node2, 1, "node2")):  # each node's job.json: its own ranks
        view = jobs.compose(folder)
        (folder / "job.json").write_text(json.dumps(dict(view.to_dict(), ntasks=2)))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))

    def step(folder: Path, node: str) -> on_cluster.NodeAnswer:
        done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(folder), "--reduce-here"],
                              capture_output=True, text=True, env=dict(env, SLURMD_NODENAME=node))
        return on_cluster.parse(node, done.stdout, done.stderr, done.returncode)

    answers = [step(node1, "node1"), step(node2, "node2")]
    merged = on_cluster.merge(tmp_path / "here" / node1.name, answers)
    whole = load_job(make_job(tmp_path / "whole"), raw=True)
    assert [(r.rank, r.host, r.total_ns) for r in merged.ranks] == [(r.rank, r.host, r.total_ns) for r in whole.ranks]
    assert merged.kernels == whole.kernels and merged.diagnosis.stragglers.straggler == \
        whole.diagnosis.stragglers.straggler
    assert "reduced on node1: 1 rank(s) in" in " ".join(merged.notes) and "reduced on node2" in " ".join(merged.notes)
    assert merged.job.status == "ok" and merged.job.nodes == ("node1", "node2")

    down = on_cluster.parse("node2", "", "srun: error: Unable to allocate resources: Requested node configuration "
                            "is not available\n", 1)
    partial_job = on_cluster.merge(tmp_path / "here" / node1.name, [answers[0], down])
    assert partial_job.job.status == "failed"
    assert partial_job.job.message.startswith("node node2 not reached (srun exited 1: srun: error: Unable to "
                                              "allocate resources")
    assert "rank(s) 1 not reduced" in partial_job.job.message
    assert (partial_job.totals.kernel_time_ns, partial_job.totals.dispatches) == (whole.ranks[0].total_ns,
                                                                              whole.ranks[0].dispatches)


def test_reduce_here_of_a_folder_this_node_lacks_says_so_in_one_line(tmp_path):
    out = io.StringIO()
    assert on_cluster.reduce_here(tmp_path / "absent", out) == 0
    answer = on_cluster.parse("node9", out.getvalue(), "", 0)
    assert answer.partials == () and answer.problem is None and answer.host


def test_a_partial_is_read_alike_with_and_without_msgspec(tmp_path):
    """The compose images and the cluster's nodes have no msgspec (Debian's Python): a partial one of
    them writes is read where msgspec is, and the other way round, to the same values."""
    job = make_job(tmp_path)
    rank_dir = job / "node1-rank0"
    made = partials.make(rank_dir / "raw", jobs.compose(job).ranks[0])
    script = ("import sys; sys.modules['msgspec'] = None\n"  # import msgspec now raises ImportError
              "from pathlib import Path\nfrom profilectl.read import partials\n"
              "p = Path(sys.argv[1])\n"
              "stored = partials.decode(p.read_bytes())\n"  # written with msgspec, read without
              "p.with_name('again.json').write_bytes(partials.encode(stored))\n")
    (rank_dir / partials.FILE).write_bytes(partials.encode(made))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    subprocess.run([sys.executable, "-c", script, str(rank_dir / partials.FILE)], check=True, env=env)
    again = partials.decode((rank_dir / "again.json").read_bytes())  # written without msgspec, read with it
    assert again == made


def test_a_rank_a_node_cannot_read_costs_that_rank_only(tmp_path, monkeypatch):
    """A damaged trace in one rank's raw/ (a shared job folder: each node's step reduces its own
    ranks): node2's step sends one line for its damaged rank, node1's its rank's partial; the merge
    says it."""
    job = make_job(tmp_path)
    trace = next((job / "node2-rank1" / "raw").glob("*.json.gz"))
    trace.unlink()
    trace.with_suffix("").write_text('{"traceEvents": [ {"ph": "X", "name": 5')  # a trace cut short
    answers = []
    for node in ("node1", "node2"):
        monkeypatch.setenv("SLURMD_NODENAME", node)
        out = io.StringIO()
        assert on_cluster.reduce_here(job, out) == 0
        answers.append(on_cluster.parse(node, out.getvalue(), "", 0))
    assert [p.rank.rank for p in answers[0].partials] == [0] and answers[0].problem is None
    assert list(answers[1].partials) == [] and answers[1].problem is None
    [note] = answers[1].notes
    assert note.startswith("node2: rank 1 (node2): not reduced: ") and "\n" not in note
    merged = on_cluster.merge(job, answers)
    assert note in merged.notes and merged.job.ranks[1].rank == 1
    assert "rank 1 (node2): not reduced on its node: its numbers are missing" in merged.notes


def test_every_table_a_reader_makes_is_carried_by_the_partial():
    """A table added to Tables later must be added to the partial too (or the job report loses it)."""
    from profilectl.model.tables import Tables
    carried = {f.name for f in dataclasses.fields(partials.Partial)}
    assert {f.name for f in dataclasses.fields(Tables)} - {"timelines"} <= carried


def test_a_copied_job_is_hashed_once_then_known_by_stat_again(tmp_path, monkeypatch):
    """A job folder copied with its sizes and mtimes (cp -a: new inodes, new ctimes): each raw file is
    hashed once to prove it unchanged (no rebuild), the partials then carry the copy's stat, and the
    next report hashes nothing."""
    job = make_job(tmp_path / "made")
    load_job(job)
    copy = tmp_path / "copied" / job.name
    shutil.copytree(job, copy)  # copy2: sizes and mtimes kept
    hashed = []
    real = partials.content_hash
    monkeypatch.setattr(partials, "content_hash", lambda path: hashed.append(path) or real(path))
    first = load_job(copy)
    assert hashed and not any("stale" in n or "read from raw files" in n for n in first.notes), first.notes
    hashed.clear()
    again = load_job(copy)
    assert hashed == [] and comparable(again) == comparable(first)
