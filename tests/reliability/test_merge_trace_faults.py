"""merge-trace under faults an operator meets: one rank whose trace holds a timestamp no clock gives
(the rank is named and left out, the others merged), a rank of 40,000 steps (matching the
collectives to steps in n log n: seconds, not hours), and --max-mb values that are no size (one
line, exit 2, before anything is read). (Full disks and planted links: test_safe_writes.py.)"""

from __future__ import annotations

import json
import sys
import time

import pytest
from reliability_support import one_line
from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import merged_trace as job_writer  # noqa: E402  (the benchmark's job writer)


@pytest.mark.parametrize("ts", ["1e300", "-1e300", "9300000000000000.5", '"99999999999999999999999"'])
def test_one_out_of_range_timestamp_costs_its_rank_only(harness, tmp_path, ts):
    job, _ = job_writer.write_job(tmp_path / "job", ranks=4, hosts=2, steps=4, kernels=3, compress=False)
    trace = next(job.glob("*-rank2/raw/*.json"))
    document = json.loads(trace.read_text())
    victim = next(e for e in document["traceEvents"] if e.get("cat") == "kernel")
    victim["ts"] = "TS-HERE"  # one kernel's start: the number as written, no float in between
    trace.write_text(json.dumps(document).replace('"TS-HERE"', ts), encoding="utf-8")
    out = tmp_path / "merged.json"
    done = harness.run("merge-trace", str(job), "-o", str(out), timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "rank 2" in said and "left out" in said and "out of any clock's range" in said, said
    merged = json.loads(out.read_text())
    names = sorted(e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name")
    assert names == ["rank 0 (node0)", "rank 1 (node0)", "rank 3 (node1)"], names


def test_forty_thousand_steps_merge_in_seconds(harness, tmp_path):
    """Each collective is matched to its step by bisection: 40 k steps on two hosts (80 k collectives)
    merge in well under a minute. Before: every collective sorted every step (not done in 30 min)."""
    job, _ = job_writer.write_job(tmp_path / "job", ranks=2, hosts=2, steps=40_000, kernels=0, compress=False)
    out = tmp_path / "merged.json"
    started = time.monotonic()
    done = harness.run("merge-trace", str(job), "-o", str(out), timeout=300)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert took < 120, f"{took:.0f} s"
    result = json.loads(out.read_text())["otherData"]
    assert [o["pairs"] for o in result["offsets"] if o["host"] == "node1"] == [40_000]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e-9"])
def test_max_mb_that_is_no_size_is_one_line_and_exit_2(harness, tmp_path, value):
    job, _ = job_writer.write_job(tmp_path / "job", ranks=2, hosts=1, steps=2, kernels=1)
    out = tmp_path / "merged.json"
    done = harness.run("merge-trace", str(job), "-o", str(out), "--max-mb", value)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "--max-mb" in one_line(done.stderr)
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
