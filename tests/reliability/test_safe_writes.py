"""One safe way to write a file into a folder someone else controls (files.write_into), used by every
writer: root writes `report -o` (every format) and `merge-trace -o` into a real user's folder while
that user plants links at every name a writer could predict (fixed names, PID-based names) and keeps
planting them as fast as it can; a root-only 0600 file at the links' end must come out untouched and
every writer must end as it would without the attack. Then the faults an operator meets: two SQLite
exports to one file at once, and a file system that fills up while an export or a merged trace is
written (one line, nothing left behind: no temporary, no journal)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest
from attacker import (as_user, keep_planting, next_pids, plant_links, reachable_folder, root_secret,
                      stop, untouched, users_folder)
from reliability_support import needs_tmpfs, one_line
from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import merged_trace as job_writer  # noqa: E402  (the benchmark's job writer)

STRAGGLER = REPO / "tests/fixtures/diagnosis/straggler"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="root writing into another user's folder needs root "
                                                         "(and useradd)")


@pytest.fixture
def base():
    with reachable_folder() as folder:
        yield folder


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A two-rank torch job (bench/merged_trace.py's writer) for merge-trace."""
    folder, _ = job_writer.write_job(tmp_path_factory.mktemp("job"), ranks=2, hosts=1, steps=4, kernels=4)
    return folder


def predictable(name: str) -> tuple[list[str], list[str]]:
    """Every name a writer of `name` used or could use beside it: fixed suffixes, and one per PID the
    kernel hands out next (the report's own process and its workers)."""
    fixed = [f".{name}.partial", f".{name}.tmp", f"{name}.tmp", f"{name}-journal", f".{name}.partial-journal"]
    pids = next_pids(1500)
    return fixed, [f".{name}.partial-{pid}" for pid in pids] + [f"{name}.{pid}.tmp" for pid in pids] + \
        [f".{name}.{pid}.tmp" for pid in pids]


WRITERS = {
    # name: (argv after `profilectl`, the files it writes in the user's folder)
    "merge-trace": (["merge-trace", "{job}", "-o", "{out}/merged.json"], ["merged.json"]),
    "merge-trace-gz": (["merge-trace", "{job}", "-o", "{out}/merged.json.gz"], ["merged.json.gz"]),
    "sqlite": (["report", str(STRAGGLER), "--format", "sqlite", "-o", "{out}/r.sqlite"], ["r.sqlite"]),
    "parquet": (["report", str(STRAGGLER), "--format", "parquet", "-o", "{out}/pq"],
                [f"pq/{t}.parquet" for t in ("idle_causes", "idle_steps", "rank_waits", "hta_idle", "kernels", "api",
                                             "memory_copies", "operators", "annotations", "timeline", "steps",
                                             "idle_gaps", "ranks", "metadata")]),
    "csv": (["report", str(STRAGGLER), "--format", "csv", "-o", "{out}/r.csv"], ["r.kernels.csv"]),
    "json": (["report", str(STRAGGLER), "--format", "json", "-o", "{out}/r.json"], ["r.json"]),
    "html": (["report", str(STRAGGLER), "--format", "html", "-o", "{out}/r.html"], ["r.html"]),
}


@root_only
@pytest.mark.parametrize("writer", list(WRITERS))
def test_root_writing_into_a_users_folder_never_follows_the_users_links(user, base, harness, job, writer):
    """The issue's attack: a link planted at the name root's writer writes its temporary under (fixed
    or PID-based) overwrote a root-only 0600 file every time. Now: the folder is opened once, the
    temporary made with O_EXCL|O_NOFOLLOW under an unpredictable name and renamed within the folder."""
    argv, outputs = WRITERS[writer]
    out = users_folder(base, "out", user)
    if writer == "parquet":
        users_folder(out, "pq", user)
    secret = root_secret(base)
    fixed = [n for output in outputs for n in predictable(Path(output).name)[0]]
    by_pid = [n for output in outputs for n in predictable(Path(output).name)[1]]
    folders = {out / Path(output).parent for output in outputs}
    for folder in folders:
        as_user(user, plant_links(folder, fixed + by_pid, secret))
    # and the fixed names again as soon as a writer removes its link (a writer that unlinks first)
    racers = [as_user(user, keep_planting(folder, fixed, secret), wait=False) for folder in folders]
    try:
        done = harness.run(*[a.format(job=job, out=out) for a in argv], "--force", timeout=300)
    finally:
        for pid in racers:
            stop(pid)
    assert untouched(secret), f"root's 0600 file was written through a planted link: {secret.read_text()[:80]!r}"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    for output in outputs:
        made = out / output
        assert made.is_file() and not made.is_symlink() and made.stat().st_size > 0, output
    if writer == "sqlite":
        db = sqlite3.connect(f"file:{out / 'r.sqlite'}?mode=ro&immutable=1", uri=True)  # links still planted
        tables = db.execute("SELECT name FROM sqlite_master").fetchall()
        assert ("kernels",) in tables
    left = [p.name for folder in folders for p in folder.iterdir()
            if p.name.startswith(".") and not p.is_symlink()]
    assert left == [], left  # no temporary of root's left beside the outputs


@pytest.mark.parametrize("force", [False, True])
def test_two_sqlite_exports_to_one_file_at_once_both_end_cleanly(harness, tmp_path, force):
    """Both fail with tracebacks before (one fixed temporary name, two SQLite connections in it). Now
    one wins, whole; the other is one line (exit 2) or, with --force, replaces it whole."""
    target = tmp_path / "both.sqlite"
    extra = ["--force"] if force else []
    procs = [harness.start("report", str(STRAGGLER), "--format", "sqlite", "-o", str(target), *extra)
             for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for proc in procs:
        proc.stdout.close()
        proc.stderr.close()
    assert all("Traceback" not in err for _, err in results), results
    codes = sorted(code for code, _ in results)
    if force:
        assert codes == [0, 0], results
    else:
        assert codes in ([0, 0], [0, 2]), results  # the second to finish: refused, or both in turn
        for code, err in results:
            if code == 2:
                assert "refusing to overwrite" in one_line(err), err
    db = sqlite3.connect(target)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM kernels").fetchone()[0] > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@needs_tmpfs
@pytest.mark.parametrize("what", ["sqlite", "parquet", "merge-trace"])
def test_a_full_disk_while_exporting_is_one_line_and_leaves_nothing(harness, small_fs, job, what):
    """A file system with room for a few KiB: the export is one line (exit 5, the folder and its free
    space named), and nothing is left in the folder (no temporary, no journal, no half table set)."""
    mount = small_fs(64)
    out = mount / "out"
    out.mkdir()
    (mount / "filler").write_bytes(bytes(max(0, os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize - 8192)))
    argv = {"sqlite": ["report", str(STRAGGLER), "--format", "sqlite", "-o", str(out / "r.sqlite")],
            "parquet": ["report", str(STRAGGLER), "--format", "parquet", "-o", str(out / "pq")],
            "merge-trace": ["merge-trace", str(job), "-o", str(out / "merged.json")]}[what]
    done = harness.run(*argv, timeout=300)
    assert done.returncode == 5 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = one_line(done.stderr)
    assert "no space left" in line and str(out) in line, line
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir())
    assert left == [], left
