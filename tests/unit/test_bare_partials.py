"""Partials of a bare profiler output (read/bare_partials.py): `report FOLDER --reduce-here` writes
one partial per rank, `report FOLDER` merges them with the numbers of the raw read (every kernel,
API, copy, operator and annotation figure, and the per-rank rows), rebuilds a stale one, names a
rank whose files are gone; bad inputs are one line and an exit code.

Inputs: real rocprofv3 traces (tests/fixtures/rocprofv3-docs) laid out as rocprofv3 writes one
output per process (<host>/<pid>_kernel_trace.csv, _memory_copy_trace.csv, _hip_api_trace.csv),
each process's durations changed so that no two ranks agree; and real torch.profiler traces of two
gloo DDP ranks with their status files (tests/fixtures/diagnosis/straggler); rocpd databases, one
per process, made as test_rocpd_reading makes them."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl.read import bare_partials
from profilectl.read.load import load
from support import REPO

FIXTURES = REPO / "tests/fixtures"
PROCESSES = (("node1", 111, 1.0), ("node1", 112, 1.5), ("node2", 211, 0.7), ("node2", 3, 2.0))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))


def rocprofv3_tree(root: Path, processes=PROCESSES) -> Path:
    """rocprofv3's default layout, one output per process; each process's durations scaled by its factor."""
    for host, pid, factor in processes:
        (root / host).mkdir(parents=True, exist_ok=True)
        for kind, source in (("kernel_trace", "kernel_trace.csv"), ("memory_copy_trace", "memory_copy_trace.csv"),
                             ("hip_api_trace", "hip_trace.csv")):
            with (FIXTURES / "rocprofv3-docs" / source).open(newline="") as fh:
                reader = csv.DictReader(fh)
                rows, columns = list(reader), reader.fieldnames
            with (root / host / f"{pid}_{kind}.csv").open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns, quoting=csv.QUOTE_ALL)
                writer.writeheader()
                for row in rows:
                    start = int(row["Start_Timestamp"])
                    end = start + round(factor * (int(row["End_Timestamp"]) - start))
                    writer.writerow({**row, "End_Timestamp": str(end)})
    return root


def torch_tree(root: Path) -> Path:
    root.mkdir(parents=True)
    for f in (FIXTURES / "diagnosis/straggler").iterdir():
        shutil.copy2(f, root / f.name)
    return root


def rocpd_tree(root: Path) -> Path:
    """rocprofv3's rocpd output, one database per process (<host>/<pid>_results.db), in the schemas
    of ROCm 7.0 and 10.0 (test_rocpd_reading.make_db: AMD's schema SQL and writer's rows)."""
    from test_rocpd_reading import make_db
    for host, pid, dispatches, schema in (("n1", 101, 300, "3.0.0"), ("n1", 102, 500, "3.0.3"), ("n2", 7, 200, "3.0.0")):
        (root / host).mkdir(parents=True, exist_ok=True)
        make_db(root / host / f"{pid}_results.db", dispatches, schema)
    return root


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profilectl", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def figures(summary) -> dict:
    data = summary.to_dict()
    for key in ("notes", "cache_hit"):
        data.pop(key)
    return data


@pytest.mark.parametrize("make", [rocprofv3_tree, rocpd_tree, torch_tree],
                         ids=["rocprofv3-per-process", "rocpd-per-process", "torch-ranks"])
def test_merged_partials_equal_the_raw_read(tmp_path, make):
    folder = make(tmp_path / "out")
    raw = load(folder, raw=True)
    done = cli("report", str(folder), "--reduce-here")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    written = sorted((folder / bare_partials.FOLDER).glob("*.partial.json"))
    assert len(lines) == len(written) == len(raw.ranks) >= 2
    assert all(line.startswith(str(folder / bare_partials.FOLDER)) and "file(s)" in line for line in lines)
    merged = load(folder)
    assert merged.notes == ()  # every partial fresh: no raw file read
    assert figures(merged) == figures(raw)
    assert merged.kernels and merged.ranks and (merged.operators or merged.api)
    # the numbers come from the partials: with the raw files gone they stay, each rank named
    for f in folder.rglob("*"):
        if f.is_file() and bare_partials.FOLDER not in f.parts:
            f.unlink()
    gone = load(folder)
    assert gone.kernels == raw.kernels
    assert gone.ranks == raw.ranks
    assert sum("its raw files are gone" in n for n in gone.notes) == len(raw.ranks)


def test_a_folder_of_partials_alone_is_merged_where_the_raw_files_are_not(tmp_path):
    folder = rocprofv3_tree(tmp_path / "scratch")
    shared = tmp_path / "shared"
    assert cli("report", str(folder), "--reduce-here", "-o", str(shared)).returncode == 0
    raw = load(folder, raw=True)
    shutil.rmtree(folder)  # the node's scratch, wiped after the job
    merged = load(shared)
    assert merged.kernels == raw.kernels
    assert merged.ranks == raw.ranks
    assert merged.api == raw.api


def test_a_stale_partial_is_rebuilt_and_a_rank_without_one_is_reduced(tmp_path):
    folder = rocprofv3_tree(tmp_path / "out")
    assert cli("report", str(folder), "--reduce-here").returncode == 0
    changed = folder / "node1" / "112_kernel_trace.csv"
    text = changed.read_text().splitlines()
    changed.write_text("\n".join(text[:-1]) + "\n")  # one dispatch fewer: its partial no longer holds
    rocprofv3_tree(folder, (("node3", 9, 1.2),))  # a process reduced nowhere yet
    merged = load(folder)
    assert figures(merged) == figures(load(folder, raw=True))
    assert any("rank pid 112 (node1): partial stale" in n for n in merged.notes)
    assert any("2 of 5 rank(s) read from raw files" in n for n in merged.notes)
    assert (folder / bare_partials.FOLDER / "node3.pid_9.partial.json").is_file()  # stored back
    assert load(folder).notes == ()


def test_one_process_has_no_rank_rows_as_in_the_raw_read(tmp_path):
    folder = rocprofv3_tree(tmp_path / "one", (("node1", 7, 1.0),))
    assert cli("report", str(folder), "--reduce-here").returncode == 0
    assert figures(load(folder)) == figures(load(folder, raw=True))


def test_a_damaged_partial_is_rebuilt_where_its_files_are_and_an_error_where_they_are_not(tmp_path):
    folder = torch_tree(tmp_path / "t")
    shared = tmp_path / "shared"
    assert cli("report", str(folder), "--reduce-here").returncode == 0
    assert cli("report", str(folder), "--reduce-here", "-o", str(shared)).returncode == 0
    torn = folder / bare_partials.FOLDER / "vm.1.partial.json"
    torn.write_text("{torn")
    merged = load(folder)
    assert figures(merged) == figures(load(folder, raw=True))
    assert any("vm.1.partial.json: not a profilectl partial" in n and n.endswith("rebuilt from its raw files")
               for n in merged.notes)
    assert load(folder).notes == ()  # stored back whole
    shutil.rmtree(folder)
    (shared / "vm.0.partial.json").write_bytes((shared / "vm.0.partial.json").read_bytes()[:500])
    done = cli("report", str(shared), "--format", "json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "vm.0.partial.json: not a profilectl partial" in done.stderr and "Traceback" not in done.stderr


def test_raw_forces_the_raw_read(tmp_path):
    folder = torch_tree(tmp_path / "t")
    assert cli("report", str(folder), "--reduce-here").returncode == 0
    for name in ("vm-rank1-947.pt.trace.json.gz", "rank-1-vm-947.status.json"):
        (folder / name).unlink()  # rank 1 gone: its partial still holds it, the raw read does not
    with_partials = json.loads(cli("report", str(folder), "--format", "json").stdout)
    done = cli("report", str(folder), "--format", "json", "--raw")
    assert done.returncode == 0, done.stderr
    raw = json.loads(done.stdout)
    assert [r["rank"] for r in with_partials["ranks"]] == ["0", "1"] and with_partials["ranks"][1]["dispatches"] > 0
    assert any(n.startswith("rank 1 (vm): its raw files are gone") for n in with_partials["notes"])
    assert raw["ranks"] == [] and not any("partial" in n for n in raw["notes"])  # one rank left: no rank table


def test_bad_inputs_are_one_line_and_an_exit_code(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing a profiler wrote")
    done = cli("report", str(empty), "--reduce-here")
    assert done.returncode == 2 and "no ranks to reduce" in done.stderr and done.stderr.count("\n") == 1
    folder = rocprofv3_tree(tmp_path / "out")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = cli("report", str(folder), "--reduce-here", "-o", str(blocker / "partials"))
    assert done.returncode == 2 and "cannot write partials there" in done.stderr and done.stderr.count("\n") == 1
    done = cli("report", str(tmp_path / "nowhere"), "--reduce-here")
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_each_node_reduces_its_scratch_into_one_shared_folder(tmp_path):
    """A job's epilogue on every node: `report /scratch/out --reduce-here -o /shared/partials`; the
    shared folder's report is the raw read of every node's files together."""
    for name in ("node1", "node2"):  # each node's scratch holds its own processes
        rocprofv3_tree(tmp_path / name / "out", tuple(p for p in PROCESSES if p[0] == name))
    shared = tmp_path / "shared"
    for name in ("node1", "node2"):
        done = cli("report", str(tmp_path / name / "out"), "--reduce-here", "-o", str(shared))
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 2, done.stderr
    together = tmp_path / "together"  # what copying both scratches back gives
    for name in ("node1", "node2"):
        shutil.copytree(tmp_path / name / "out", together, dirs_exist_ok=True)
    merged, raw = figures(load(shared)), figures(load(together, raw=True))
    for data in (merged, raw):
        data.pop("source")
    assert merged == raw
    # the nodes' scratch folders lie outside the shared folder: never read from it (the partials' numbers
    # are used as they are, said once), so a node's scratch wiped changes nothing
    shutil.rmtree(tmp_path / "node2")
    notes = load(shared).notes
    assert any(n.startswith("4 rank(s) merged from their partials only: they name folders outside") and "node2" in n
               for n in notes), notes


def test_partials_made_on_scratch_stay_fresh_when_the_folder_is_copied_back(tmp_path):
    scratch = torch_tree(tmp_path / "scratch" / "out")
    assert cli("report", str(scratch), "--reduce-here").returncode == 0
    back = tmp_path / "home" / "out"
    shutil.copytree(scratch, back)  # copy2: sizes and mtimes kept (as cp -a, rsync -a)
    shutil.rmtree(scratch)
    merged = load(back)
    assert merged.notes == ()
    assert figures(merged) == figures(load(back, raw=True))


def test_a_relative_path_reports_as_the_raw_read_of_it(tmp_path):
    rocprofv3_tree(tmp_path / "out")

    def report(*extra: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "profilectl", "report", "out", "--format", "json", *extra],
                              capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout) if done.stdout.startswith("{") else {}
        for key in ("notes", "cache_hit"):
            data.pop(key, None)
        return data
    raw = report("--raw")
    assert report("--reduce-here") == {}
    merged = report()
    assert merged == raw and merged["source"]["files"][0].startswith("out/")


def test_a_rank_whose_file_is_broken_is_named_and_the_others_reduced(tmp_path):
    folder = rocprofv3_tree(tmp_path / "out")
    broken = folder / "node2" / "3_kernel_trace.csv"
    broken.write_text(broken.read_text().splitlines()[0] + '\n"KERNEL_DISPATCH","Agent 4",1,1,1,1,1,"k",1,12x,13\n')
    done = cli("report", str(folder), "--reduce-here")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "rank pid 3 (node2): not reduced" in done.stderr and "1 of 4 rank(s) not reduced" in done.stderr
    assert len(done.stdout.splitlines()) == 3 == len(list((folder / bare_partials.FOLDER).iterdir()))


def test_a_bare_partial_reads_the_same_without_msgspec(tmp_path):
    """The nodes of the compose cluster have no msgspec: the standard library's reading is the same."""
    from profilectl.read import partials
    folder = torch_tree(tmp_path / "t")
    assert cli("report", str(folder), "--reduce-here").returncode == 0
    for path in (folder / bare_partials.FOLDER).iterdir():
        data = path.read_bytes()
        assert partials._decode_stdlib(data, str(path)) == partials.decode(data, str(path))
        assert partials.decode(data).bare is not None


def test_load_asks_for_partials_by_bare_partials_own_names(tmp_path):
    """read/load decides without importing bare_partials whether a folder may hold partials (cold
    start): its names are bare_partials', and it says yes wherever stored_partials finds some."""
    from profilectl.read import load as load_module
    assert (load_module.PARTIALS_FOLDER, load_module.PARTIAL_SUFFIX) == (bare_partials.FOLDER, bare_partials.SUFFIX)
    assert not load_module.may_hold_partials(tmp_path)
    (tmp_path / f"rank0{bare_partials.SUFFIX}").write_text("{}")
    assert load_module.may_hold_partials(tmp_path) and bare_partials.stored_partials(tmp_path) == tmp_path
    inside = tmp_path / "b"
    (inside / bare_partials.FOLDER).mkdir(parents=True)
    (inside / bare_partials.FOLDER / f"rank0{bare_partials.SUFFIX}").write_text("{}")
    assert load_module.may_hold_partials(inside) and bare_partials.stored_partials(inside) == inside / bare_partials.FOLDER
