"""`profilectl query` as a user could misuse it, by accident or on purpose: statements that would
write files anywhere (ATTACH, VACUUM INTO), a recursive query that never ends and the Ctrl-C meant to
stop it, a result far larger than the memory one would give it, a query that needs more memory than
its budget. Real processes, real signals, and the child's own peak memory (wait4's ru_maxrss)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_support import one_line

# The peak memory of a command, from a small process of its own: a child's ru_maxrss starts from the
# memory of the process it was forked from (pytest's, hundreds of MiB late in a session).
PEAK = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
sys.stderr.write(f"\\n{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\\n")
"""
RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def a_trace(folder: Path) -> Path:
    """A small Chrome trace with three GPU kernels: tables to query."""
    events = [{"name": f"kernel_{i}", "ph": "X", "ts": 10 + 10 * i, "dur": 5, "cat": "kernel", "pid": 1, "tid": 1,
               "args": {"device": 0, "stream": 7}} for i in range(3)]
    path = folder / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("statement", [
    "ATTACH DATABASE '{target}' AS planted",
    "VACUUM INTO '{target}'",
    "VACUUM",
    "PRAGMA hard_heap_limit = 0",  # lifting its own memory budget
    "DELETE FROM kernels",
])
def test_a_query_never_writes_a_file_nor_the_tables(harness, tmp_path, statement):
    trace = a_trace(tmp_path)
    target = tmp_path / "written-by-query.db"
    done = harness.run("query", str(trace), statement.format(target=target))
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "refused" in one_line(done.stderr) and "Traceback" not in done.stderr
    assert not target.exists(), f"{statement} wrote {target}"
    still = harness.run("query", str(trace), "SELECT count(*) AS n FROM kernels", "--format", "json")
    assert json.loads(still.stdout) == [{"n": 3}]


def test_reading_pragmas_and_schema_questions_still_answer(harness, tmp_path):
    trace = a_trace(tmp_path)
    done = harness.run("query", str(trace), "SELECT name FROM pragma_table_info('kernels') WHERE name = 'calls'",
                       "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"name": "calls"}]


def test_ctrl_c_stops_a_runaway_recursive_query(harness, tmp_path):
    trace = a_trace(tmp_path)
    process = harness.start("query", str(trace), RUNAWAY)
    time.sleep(4)  # loading done, deep inside SQLite
    sent = time.monotonic()
    os.kill(process.pid, signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("Ctrl-C did not stop the query within 20 s")
    assert time.monotonic() - sent < 5
    assert process.returncode == 130, stderr
    assert "interrupted by SIGINT" in one_line(stderr)


def test_a_runaway_query_ends_at_its_time_budget(harness, tmp_path):
    trace = a_trace(tmp_path)
    started = time.monotonic()
    done = harness.run("query", str(trace), RUNAWAY, "--timeout", "2", timeout=60)
    assert done.returncode == 124, done.stderr
    assert "2 s budget" in one_line(done.stderr)
    assert time.monotonic() - started < 30
    via_env = dict(harness.env, PROFILECTL_QUERY_TIMEOUT_S="1")
    done = subprocess.run(harness.argv("query", str(trace), RUNAWAY), capture_output=True, text=True, env=via_env,
                          timeout=60)
    assert done.returncode == 124 and "1 s budget" in one_line(done.stderr), done.stderr


def test_a_query_past_its_memory_budget_is_one_line(harness, tmp_path):
    trace = a_trace(tmp_path)
    hungry = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 2000000) "
              "SELECT length(group_concat(hex(randomblob(40)))) FROM c")
    done = harness.run("query", str(trace), hungry, "--memory-mb", "32", timeout=120)
    assert done.returncode == 7, (done.returncode, done.stderr)
    assert "memory budget of 32 MiB" in one_line(done.stderr) and "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_a_budget_that_is_not_a_number_is_one_line(harness, tmp_path, value):
    done = harness.run("query", str(a_trace(tmp_path)), "SELECT 1", "--timeout", value)
    assert done.returncode == 2 and "--timeout" in one_line(done.stderr), done.stderr


def test_a_large_result_is_streamed_not_held(harness, tmp_path):
    """100 k rows of 500 characters (~55 MB of JSON): profilectl's peak memory stays near its
    start-up size instead of growing with the result (it held 3 GB for 458 MB of JSON)."""
    trace = a_trace(tmp_path)
    large = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) "
             "SELECT x, printf('%0500d', x) AS pad FROM c")
    out = tmp_path / "out.json"
    with open(out, "w") as sink:
        measured = subprocess.run([sys.executable, "-c", PEAK, *harness.argv("query", str(trace), large, "--format",
                                                                            "json")],
                                  stdout=sink, stderr=subprocess.PIPE, text=True, env=harness.env, timeout=300)
    code, peak_kib = (int(word) for word in measured.stderr.splitlines()[-1].split())
    assert code == 0, measured.stderr
    peak_mib = peak_kib / 1024
    with open(out) as fh:
        rows = json.load(fh)
    assert len(rows) == 100_000 and rows[-1]["x"] == 100_000
    assert peak_mib < 120, f"peak {peak_mib:.0f} MiB for a {out.stat().st_size >> 20} MiB result"
