"""The Python API, SQL and the file exports, on real tool outputs: a notebook's few lines of polars
give `compare`'s numbers per rank; `query` answers a GROUP BY with the kernels table's numbers;
Parquet and SQLite read back equal the JSON report; `profilectl.run` is the CLI's run."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from test_launchers import needs_torch

import profilectl
from profilectl import errors
from support import REPO

SLOWER = {"pid 112": {"divide_kernel": 3.0}, "pid 211": {"multiply_kernel": 2.0, "addition_kernel": 1.5}}


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200"), timeout=timeout)


def rank_tree(root: Path, source: Path, slower: dict[str, dict[str, float]]) -> Path:
    """Three processes' real rocprofv3 kernel traces (rocprofv3's default <host>/<pid>_ layout), the
    kernels named in `slower` made that many times longer in that process."""
    with source.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows, columns = list(reader), reader.fieldnames
    for host, pid in (("node1", 111), ("node1", 112), ("node2", 211)):
        factors = slower.get(f"pid {pid}", {})
        (root / host).mkdir(parents=True, exist_ok=True)
        with (root / host / f"{pid}_kernel_trace.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, quoting=csv.QUOTE_ALL)
            writer.writeheader()
            for row in rows:
                factor = next((f for k, f in factors.items() if row["Kernel_Name"].startswith(k)), 1.0)
                start = int(row["Start_Timestamp"])
                writer.writerow({**row, "End_Timestamp": str(start + round(factor * (int(row["End_Timestamp"]) - start)))})
    return root


@pytest.fixture
def two_runs(tmp_path, fixtures):
    source = fixtures / "rocprofv3-docs/kernel_trace.csv"
    return rank_tree(tmp_path / "base", source, {}), rank_tree(tmp_path / "new", source, SLOWER)


def test_top_kernels_that_grew_per_rank_in_a_few_lines_of_polars_equal_compare(two_runs):
    base, new = profilectl.open(two_runs[0]), profilectl.open(two_runs[1])
    # the notebook's lines
    grown = (base.kernels_by_rank.join(new.kernels_by_rank, on=["rank", "name"], suffix="_new")
             .with_columns(grew_ns=pl.col("total_ns_new") - pl.col("total_ns"))
             .filter(pl.col("grew_ns") > 0)
             .sort(["rank", "grew_ns"], descending=[False, True])
             .group_by("rank", maintain_order=True).head(5))
    assert sorted(set(grown["rank"])) == ["pid 112", "pid 211"]  # pid 111 did not change
    for rank in ("pid 111", "pid 112", "pid 211"):
        result = profilectl.compare(base.rank(rank), new.rank(rank)).kernels
        expected = result.filter(pl.col("delta_ns") > 0).sort("delta_ns", descending=True).head(5)
        mine = grown.filter(pl.col("rank") == rank)
        assert mine["name"].to_list() == expected["name"].to_list()
        assert mine["grew_ns"].to_list() == expected["delta_ns"].to_list()
    # the known answer: pid 112's divide_kernel, twice its own time more (3x as long)
    divide = grown.filter(pl.col("rank") == "pid 112").row(0, named=True)
    assert divide["name"].startswith("divide_kernel") and divide["grew_ns"] == pytest.approx(2 * divide["total_ns"], abs=2)
    # and the per-rank totals are compare's, as the CLI prints them
    cli_ranks = json.loads(cli("compare", str(two_runs[0]), str(two_runs[1]), "--format", "json").stdout)["ranks"]
    sums = new.kernels_by_rank.group_by("rank").agg(pl.col("total_ns").sum())
    assert {r["rank"]: r["total_ns_b"] for r in cli_ranks} == dict(sums.iter_rows())
    assert profilectl.compare(base, new).ranks.to_dicts() == cli_ranks


def test_the_tables_are_the_reports_and_the_notebook_view_its_html(two_runs):
    run = profilectl.open(two_runs[1])
    report = json.loads(cli("report", str(two_runs[1]), "--format", "json").stdout)
    assert run.kernels.select("name", "calls", "total_ns").to_dicts() == \
        [{k: r[k] for k in ("name", "calls", "total_ns")} for r in report["kernels"]]
    assert run.ranks["rank"].to_list() == [r["rank"] for r in report["ranks"]]
    assert run.gaps.height == len(report["timeline"]["gaps"]) and "duration_ns" in run.gaps.columns
    assert run.operators.is_empty() and run.metadata["tool"].startswith("rocprofv3")
    html = cli("report", str(two_runs[1]), "--format", "html").stdout
    assert run._repr_html_() == html


def test_query_group_by_over_kernels_equals_the_kernels_table(two_runs):
    path = str(two_runs[1])
    report = json.loads(cli("report", path, "--format", "json").stdout)
    done = cli("query", path, "SELECT name, SUM(calls) AS calls, SUM(total_ns) AS total_ns, COUNT(*) AS n "
                              "FROM kernels GROUP BY name ORDER BY total_ns DESC", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["name"], r["calls"], r["total_ns"]) for r in rows] == \
        [(k["name"], k["calls"], k["total_ns"]) for k in report["kernels"]]
    total = json.loads(cli("query", path, "SELECT SUM(total_ns) AS t FROM kernels", "--format", "json").stdout)
    assert total[0]["t"] == report["totals"]["gpu_time_ns"]
    assert profilectl.open(two_runs[1]).sql("SELECT rank, total_ns FROM ranks").to_dicts() == \
        [{"rank": r["rank"], "total_ns": r["total_ns"]} for r in report["ranks"]]
    bad = cli("query", path, "SELECT * FROM no_such_table")
    assert bad.returncode == errors.USAGE and "no such table" in bad.stderr and "kernels" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def _rows_of(report: dict, key: str) -> list[dict]:
    return {"counters": report["counters_by_kernel"], "idle_gaps": report["timeline"]["gaps"]}.get(key, report.get(key))


def test_parquet_and_sqlite_read_back_equal_the_json_report(fixtures, tmp_path):
    source = str(fixtures / "rocprofv3-docs")
    report = json.loads(cli("report", source, "--format", "json").stdout)
    done = cli("report", source, "--format", "parquet", "-o", str(tmp_path / "pq"))
    assert done.returncode == 0, done.stderr
    database = tmp_path / "report.sqlite"
    done = cli("report", source, "--format", "sqlite", "-o", str(database))
    assert done.returncode == 0, done.stderr
    files = sorted(p.stem for p in (tmp_path / "pq").glob("*.parquet"))
    assert files == ["annotations", "api", "counters", "hotspots", "hta_idle", "idle_causes", "idle_gaps", "kernels", "memory_copies",
                     "metadata", "steady_state", "timeline"]
    db = sqlite3.connect(database)
    db.row_factory = sqlite3.Row
    for key in ("kernels", "api", "memory_copies", "counters", "hotspots", "idle_gaps", "annotations"):
        expected = _rows_of(report, key)
        parquet = pl.read_parquet(tmp_path / "pq" / f"{key}.parquet").to_dicts()
        sql = [dict(r) for r in db.execute(f"SELECT * FROM {key}")]
        for got in (parquet, sql):
            assert [{k: row.get(k) for k in expected[0]} for row in got] == expected, key
    timeline = pl.read_parquet(tmp_path / "pq/timeline.parquet").row(0, named=True)
    assert timeline["busy_ns"] == report["timeline"]["merged"]["busy_ns"]
    assert [dict(r) for r in db.execute("SELECT * FROM section_kernels")] == [dict(r) for r in db.execute("SELECT * FROM kernels")]
    notes = [r["note"] for r in db.execute("SELECT note FROM document_notes WHERE section = 'timeline'")]
    assert notes[0].startswith("GPU busy")
    metadata = dict(db.execute("SELECT key, value FROM metadata").fetchall())
    assert metadata["tool"] == report["metadata"]["tool"]
    again = cli("report", source, "--format", "sqlite", "-o", str(database))
    assert again.returncode == errors.USAGE and "refusing to overwrite" in again.stderr


@needs_torch  # the traces are made by /usr/bin/python3's torch.profiler
def test_compare_of_cpu_only_traces_says_what_it_compares(tmp_path):
    """Two CPU-only torch.profiler traces (Debian's torch, no GPU): their operators, not two header lines."""
    script = ("import sys, torch\nfrom torch.profiler import profile, ProfilerActivity\nx = torch.randn(128, 128)\n"
              "with profile(activities=[ProfilerActivity.CPU]) as p:\n"
              "    for _ in range(int(sys.argv[2])):\n        y = torch.relu(x @ x)\n"
              "p.export_chrome_trace(sys.argv[1])\n")
    traces = [tmp_path / "a.json", tmp_path / "b.json"]
    for trace, loops in zip(traces, (2, 6)):
        done = subprocess.run(["/usr/bin/python3", "-c", script, str(trace), str(loops)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    table = cli("compare", *map(str, traces))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) > 2 and "CPU operators in both, compared by self time" in table.stdout
    assert "aten::mm" in table.stdout and "Operators in both" in table.stdout
    result = json.loads(cli("compare", *map(str, traces), "--format", "json").stdout)
    mm = next(r for r in result["operators"] if r["name"] == "aten::mm")
    assert (mm["calls_a"], mm["calls_b"]) == (2, 6) and result["kernels"] == []
    assert "CPU operators in both" in cli("compare", *map(str, traces), "--format", "md").stdout


def test_compare_with_nothing_to_compare_says_so():
    from rich.console import Console

    from profilectl.report import render
    from profilectl.report.compare import compare
    from profilectl.read.summary import SourceInfo, Summary
    console = Console(record=True, width=200)
    render.comparison(console, compare(Summary(source=SourceInfo("x", "a")), Summary(source=SourceInfo("x", "b"))))
    assert "nothing to compare" in console.export_text()


def test_run_is_the_clis_run(tmp_path):
    traces = tmp_path / "traces"
    options = ["--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--", sys.executable, "-c", "pass"]
    planned = profilectl.run("profile", ["--dry-run", *options])
    cli_plan = json.loads(cli("profile", "--dry-run", "--json", *options).stdout)
    mine = json.loads(json.dumps(planned.to_dict(), default=str))
    argv = (lambda plan: [(s["argv"], s["label"], s["timed"]) for p in plan["phases"] for s in p["steps"]])
    assert argv(mine) == argv(cli_plan) and mine["backend"] == cli_plan["backend"] == "timing"
    assert mine["phases"][0]["environment"] == cli_plan["phases"][0]["environment"]
    result = profilectl.run("profile", options, stream_output=False)
    assert (result.exit_code, result.status) == (0, "ok") and result.run_dir.parent == traces
    opened = result.open()
    assert opened.timing["runs"].to_list() == [1] and opened.summary.run and opened.summary.run.service == "profile"
    with pytest.raises(errors.UsageError):
        profilectl.run("report", ["x"])
    failed = profilectl.run("profile", [*options[:-2], "-c", "raise SystemExit(3)"], stream_output=False)
    assert failed.exit_code == errors.WORKLOAD_FAILED and failed.status == "failed"


def test_import_profilectl_loads_no_api():
    done = subprocess.run([sys.executable, "-c", "import sys, profilectl; assert 'profilectl.api' not in sys.modules; "
                           "assert 'polars' not in sys.modules; profilectl.open; assert 'profilectl.api' in sys.modules; "
                           "print(profilectl.API_VERSION)"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr


@needs_torch
def test_a_real_torchrun_job_per_rank_operators_that_grew_equal_compare(machine):
    """Two real CPU data-parallel runs (torchrun, gloo, Debian's torch), 2 and 6 training steps, traced:
    the operators that grew per rank, from the API in a few lines of polars, are compare's numbers."""
    from cli_support import json_run
    from test_launchers import DDP, torchrun
    runs = []
    for steps in ("2", "6"):
        result, run = json_run(machine, "trace", "--steps", "all", "--", *torchrun(), DDP, "--steps", steps, timeout=300)
        assert result["status"] == "ok", result["message"]
        runs.append(profilectl.open(run))
    base, new = runs
    assert list(base.rank_runs) == list(new.rank_runs) == ["0", "1"]
    grown = (base.operators_by_rank.join(new.operators_by_rank, on=["rank", "name"], suffix="_new")
             .with_columns(grew_ns=pl.col("self_ns_new") - pl.col("self_ns"))  # operators nest: self time
             .sort(["rank", "grew_ns"], descending=[False, True])
             .group_by("rank", maintain_order=True).head(5))
    for rank in ("0", "1"):
        expected = (profilectl.compare(base.rank(rank), new.rank(rank)).operators
                    .sort("delta_ns", descending=True).head(5))
        mine = grown.filter(pl.col("rank") == rank)
        assert mine["name"].to_list() == expected["name"].to_list()
        assert mine["grew_ns"].to_list() == expected["delta_ns"].to_list()
        # the optimizer's range is a user range, not an operator (Debian's torch has no Kineto: the
        # start-up hook writes the range's category)
        assert new.operators_by_rank.filter(pl.col("name") == "Optimizer.step#SGD.step").height == 0
        step = new.rank(rank).annotations.filter(pl.col("name") == "Optimizer.step#SGD.step")
        assert step["calls"].to_list() == [6]  # the known answer: 6 steps in this rank
    for run, steps in ((base, 2), (new, 6)):
        optimizer = run.annotations.filter(pl.col("name") == "Optimizer.step#SGD.step")
        assert optimizer["calls"].sum() == 2 * steps  # both ranks together
