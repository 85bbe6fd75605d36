"""User annotations (record_function / user_annotation ranges, ProfilerStep#N) as their own table:
the same calls, total and self time as torch's key_averages() of the same profile, and the GPU time
of what was launched inside each range, checked by hand on a real trace."""

import gzip
import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from test_launchers import needs_torch  # the one check for Debian's torch at /usr/bin/python3

from profilectl.formats import torch_trace
from profilectl.report.sections import annotations as annotation_section
from profilectl.read.summary import SourceInfo, build

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SYSTEM_PYTHON = Path("/usr/bin/python3")

# Runs under Debian's torch (no Kineto: its own export has no categories), so the trace is written
# here from the profile's own events, in kineto's layout: a record_function range (RecordScope
# USER_SCOPE) as "user_annotation", everything else as "cpu_op"; ts and dur are the events' integer µs.
PROFILE = r"""
import json, sys, torch
from torch.profiler import profile, record_function, ProfilerActivity
x = torch.randn(96, 96)
def work(steps):
    for step in range(steps):
        with record_function("## step ##"):
            with record_function("forward"):
                y = torch.relu(x @ x)
                with record_function("forward"):  # the same name nested, with a sibling: both count
                    y = y + 1
                z = y.sum()
            with record_function("loss"):
                z = z * 2
with profile(activities=[ProfilerActivity.CPU]) as prof:
    work(4)
USER_SCOPE = 7
events = [{"ph": "X", "cat": "user_annotation" if e.scope == USER_SCOPE else "cpu_op", "name": e.name,
           "pid": 1, "tid": e.thread, "ts": e.time_range.start, "dur": e.time_range.end - e.time_range.start}
          for e in prof.profiler.function_events]
json.dump({"schemaVersion": 1, "traceEvents": events}, open(sys.argv[1], "w"))
json.dump([[e.key, e.scope == USER_SCOPE, e.count, e.cpu_time_total, e.self_cpu_time_total]
           for e in prof.key_averages()], open(sys.argv[2], "w"))
"""


@needs_torch
def test_annotation_rows_equal_key_averages_of_the_same_profile(tmp_path):
    trace, averages = tmp_path / "trace.json", tmp_path / "key_averages.json"
    done = subprocess.run([str(SYSTEM_PYTHON), "-c", PROFILE, str(trace), str(averages)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = json.loads(averages.read_text())
    tables = torch_trace.read(trace)
    rows = {row.name: row for row in tables.annotations}
    user = {key: (calls, total, self_total) for key, is_user, calls, total, self_total in expected if is_user}
    assert set(rows) == set(user) == {"## step ##", "forward", "loss"}
    for name, (calls, total_us, self_us) in user.items():
        row = rows[name]
        assert row.calls == calls == {"## step ##": 4, "forward": 8, "loss": 4}[name]
        # the trace holds torch's own integer µs: totals are exact
        assert (row.total_ns, row.self_ns) == (total_us * 1000, self_us * 1000)
        assert row.gpu_ns is None  # a CPU-only profile links no launch
    ops = {key: (calls, total, self_total) for key, is_user, calls, total, self_total in expected if not is_user}
    assert {name: (s.calls, s.total / 1000, s.self_total / 1000) for name, s in tables.operators.items()} == ops


def raw(path):
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def test_gpu_time_under_each_range_is_what_its_thread_launched_inside_it():
    """HTA's real sampled trace (torch 2.x, DDP): each annotation's GPU time by hand, from the raw events:
    the runtime calls of the range's thread that start inside it, their correlation ids, the GPU
    activities carrying those ids."""
    path = FIXTURES / "hta" / "trace_filter_sampled_rank-0.json.gz"
    events = raw(path)
    gpu_of = defaultdict(int)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu_of[e["args"]["correlation"]] += round(e["dur"] * 1000)
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    expected = defaultdict(lambda: [0, 0, 0])
    for a in events:
        if a.get("cat") != "user_annotation":
            continue
        start, end = round(a["ts"] * 1000), round((a["ts"] + a["dur"]) * 1000)
        inside = sum(gpu_of.get(e["args"].get("correlation"), 0) for e in launches
                     if (e["pid"], e["tid"]) == (a["pid"], a["tid"]) and start <= round(e["ts"] * 1000) < end)
        expected[a["name"]][0] += 1
        expected[a["name"]][1] += round(a["dur"] * 1000)
        expected[a["name"]][2] += inside
    tables = torch_trace.read(path)
    found = {row.name: [row.calls, row.total_ns, row.gpu_ns] for row in tables.annotations}
    assert found == dict(expected)
    assert found["## forward ##"][2] > 100_000_000  # the forward pass launched 189 ms of GPU work
    steps = [row for row in tables.annotations if row.name.startswith("ProfilerStep#")]
    assert len(steps) == 2 and all(row.gpu_ns for row in steps)


def test_the_annotations_section_and_the_api_table(tmp_path):
    path = FIXTURES / "hta" / "trace_filter_sampled_rank-0.json.gz"
    summary = build(torch_trace.read(path), SourceInfo(kind="trace", path=str(path)))
    section = annotation_section.build(summary)
    assert section is not None and section.key == "annotations"
    ranges, steps = section.tables  # user ranges and the profiler's steps, each in a table of its own
    assert (ranges.key, steps.key) == ("annotations", "profiler_steps")
    names = [c.name for c in ranges.columns]
    assert names[:6] == ["rank", "name", "calls", "total_ns", "self_ns", "gpu_ns"]
    range_names = [dict(zip(names, row))["name"] for row in ranges.rows]
    step_names = [dict(zip(names, row))["name"] for row in steps.rows]
    assert "## forward ##" in range_names and not any(n.startswith("ProfilerStep#") for n in range_names)
    assert step_names and all(n.startswith("ProfilerStep#") for n in step_names)
    assert step_names == sorted(step_names, key=lambda n: int(n.split("#")[1]))  # in step order
    pytest.importorskip("polars")
    import profilectl
    run = profilectl.open(path)
    frame = run.annotations  # API version 1: both together
    assert frame.height == len(summary.annotations) == len(ranges.rows) + len(steps.rows)
    assert set(frame.columns) >= {"name", "calls", "total_ns", "self_ns", "gpu_ns"}
    assert run.profiler_steps.height == len(steps.rows) and run.user_ranges.height == len(ranges.rows)


def test_annotations_per_rank_and_through_the_stored_summary(tmp_path):
    """Two ranks' traces in one folder: each rank's rows apart, the rank column shown, and the rows
    come back unchanged from summary.json (msgspec's typed decoding)."""
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    from profilectl.read.summary import Summary
    source = FIXTURES / "hta" / "trace_filter_sampled_rank-0.json.gz"
    for rank in (0, 1):
        (tmp_path / f"rank-{rank}.pt.trace.json.gz").write_bytes(source.read_bytes())
    summary = build(read_path(tmp_path, READERS), SourceInfo(kind="trace", path=str(tmp_path)))
    ranks = {row.rank for row in summary.annotations}
    assert len(ranks) == 2
    one = [row for row in summary.annotations if row.rank == min(ranks)]
    other = [row for row in summary.annotations if row.rank == max(ranks)]
    assert [(r.name, r.calls, r.total_ns, r.gpu_ns) for r in one] == [(r.name, r.calls, r.total_ns, r.gpu_ns) for r in other]
    section = annotation_section.build(summary)
    assert section is not None
    rank_column, = [c for c in section.tables[0].columns if c.name == "rank"]
    assert rank_column.show == "always"
    summary.write(tmp_path / "summary.json")
    assert Summary.read(tmp_path / "summary.json").annotations == summary.annotations
