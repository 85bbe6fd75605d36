"""The Python API's tables per rank have the ranks the report has, for every input the report splits
into ranks: one file of several ranks (an XLA trace of eight devices), traces whose names give no
rank (HTA's, named by their tool). And compare's tables always have their columns. Expected numbers
from the raw JSON with Decimal, not from profilectl."""

import gzip
import json
import shutil
from collections import defaultdict
from decimal import Decimal

import polars as pl

import profilectl
from support import FIXTURES

XLA = FIXTURES / "xla-trace" / "xprof-mi300x-8gpu" / "tw003.trace.json.gz"


def _device_kernels():
    with gzip.open(XLA, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    totals = defaultdict(lambda: defaultdict(int))
    for e in events:
        process = processes.get(e.get("pid"), "")
        if e.get("ph") == "X" and process.startswith("/device:") \
                and threads.get((e["pid"], e["tid"]), "").startswith("Stream #") and not e["name"].startswith("Memcpy"):
            totals[f"tw003/{process[len('/device:'):]}"][e["name"]] += int(Decimal(str(e["dur"])) * 1000)
    return totals


def test_eight_devices_of_one_process_are_eight_ranks_in_the_api():
    run = profilectl.open(XLA)
    expected = _device_kernels()
    assert set(run.ranks["rank"].to_list()) == set(expected)  # the report's ranks table
    by_rank = run.kernels_by_rank
    assert set(by_rank["rank"].to_list()) == set(expected)  # before: one rank "0"
    got = defaultdict(dict)
    for row in by_rank.select("rank", "name", "total_ns").iter_rows():
        got[row[0]][row[1]] = row[2]
    assert {rank: dict(names) for rank, names in expected.items()} == dict(got)


def test_traces_named_by_their_tool_are_ranks_by_the_report(tmp_path):
    for name in ("critical_path_alexnet_trace.json.gz", "critical_path_simple_add_trace.json.gz"):
        shutil.copyfile(FIXTURES / "hta" / name, tmp_path / name)
    run = profilectl.open(tmp_path)
    ranks = set(run.ranks["rank"].to_list())
    assert len(ranks) == 2 and set(run.kernels_by_rank["rank"].to_list()) == ranks
    for rank in ranks:  # each rank's kernels are its own file's
        mine = run.kernels_by_rank.filter(pl.col("rank") == rank)
        assert mine["total_ns"].sum() == run.rank(rank).kernels["total_ns"].sum() > 0


def test_compare_tables_have_their_columns_even_when_empty():
    cpu_only = FIXTURES / "hta" / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    compared = profilectl.compare(cpu_only, cpu_only)
    assert compared.kernels.height == 0 and {"name", "total_ns_a", "total_ns_b"} <= set(compared.kernels.columns)
    assert compared.operators.height > 0  # the CPU operators do compare
    assert "rank" in compared.ranks.columns and compared.only_in_a.columns
