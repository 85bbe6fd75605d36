"""CI smoke of issue 38's reading targets: `bench/targets.py --smoke` on small inputs, with every bound
3x looser than the target. Ratios only (two processes on the same machine), never an absolute time:
the table has its shape, every ratio is finite and under its loose bound, every answer checks."""

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys

from support import REPO

TARGETS = REPO / "bench" / "targets.py"
LOOSE = 3.0
EXPECTED = {  # target: its bound (x for times, MiB for memory), before --loose
    "csv: report / polars same work": 1.0,
    "csv: report / polars bare group-by": 1.5,
    "csv: report peak RSS": 512,
    "ranks: report peak RSS": 512,
    "torch .json.gz: report / msgspec reader": 1.2,
    "torch .json.gz: report peak RSS": 512,
    "cold start: report / bare group-by": 2.0,
}


def _module():
    spec = importlib.util.spec_from_file_location("bench_targets", TARGETS)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return module


def test_the_smoke_run_meets_loose_bounds(tmp_path):
    assert os.access(TARGETS, os.X_OK)
    done = subprocess.run([sys.executable, str(TARGETS), "--smoke", "--loose", str(LOOSE), "--json",
                           "--workdir", str(tmp_path / "inputs")], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    result = json.loads(done.stdout)
    rows = result["rows"]
    assert {row["target"] for row in rows} == set(EXPECTED)
    for row in rows:
        assert set(row) == {"target", "size", "profilectl", "alternative", "alternative_name", "unit", "ratio",
                            "round_ratios", "bound", "pass"}
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
        assert row["bound"] == EXPECTED[row["target"]] * LOOSE, row
        if row["unit"] == "s":  # a ratio of two processes' wall times
            assert row["alternative"] > 0 and row["profilectl"] > 0, row
            # the median of the rounds' own ratios, one a round
            assert len(row["round_ratios"]) == result["repeat"], row
            assert row["ratio"] == statistics.median(row["round_ratios"]), row
            assert row["ratio"] <= row["bound"], f"{row['target']}: {row['ratio']:.2f}x over the loose bound"
        else:  # peak RSS against the 512 MiB budget
            assert row["unit"] == "MiB" and row["alternative"] is None
            assert row["profilectl"] <= row["bound"], row
        assert row["pass"] is True
    assert result["checks"] and all(check["ok"] for check in result["checks"]), result["checks"]
    assert result["passed"] is True and done.returncode == 0

    # the table a person reads: one line per target, seven columns, the verdict last
    lines = _module().table(result).splitlines()
    header, rule, body = lines[0], lines[1], lines[2:2 + len(rows)]
    assert header == "| target | size | profilectl | alternative | ratio | bound | result |"
    assert rule == "|---|---|---|---|---|---|---|"
    assert all(line.count(" | ") == 6 and line.endswith(" | pass |") for line in body), body
