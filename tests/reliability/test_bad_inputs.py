"""Bad files and values, as a user meets them: each is one line on stderr (whatever the terminal)
and the documented exit code, never a traceback, never an empty report that exits 0; `report -o`
never destroys what it reads or what a run wrote; secrets given with --env are never stored."""

import json
import os
import pty
import subprocess

import pytest
from reliability_support import manifest_of, one_line, only_run
from support import read_terminal

GOOD = {"schema_version": 1, "profilectl_version": "0.1", "service": "trace", "backend": "timing", "reason": "r",
        "fallbacks": [], "tool": None, "argv": ["true"], "phases": [], "workload": ["true"],
        "workload_source": "argument", "counter_set": None, "gpu": None, "started_at": "2026-01-01T00:00:00.000Z",
        "status": "ok", "exit_code": 0}


def made_run(harness):
    traces = harness.traces()
    done = harness.run("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--", "true")
    assert done.returncode == 0, done.stderr
    return only_run(traces)


@pytest.mark.parametrize("name, text, words", [
    ("list", "[1, 2, 3]", "expected a JSON object, found list"),
    ("numeric-start", json.dumps(dict(GOOD, started_at=1763683200)), 'wrong value type for field "started_at"'),
    ("truncated", json.dumps(GOOD)[:40], "not valid JSON"),
])
def test_a_broken_manifest_is_one_line_and_never_hides_the_other_runs(harness, tmp_path, name, text, words):
    traces = harness.traces()
    harness.plant(traces, "20260101T000000Z-trace-aaaaaa", json.dumps(GOOD))
    bad = harness.plant(traces, f"20260101T000001Z-trace-{name}", text)
    listed = harness.run("ls", "--json", str(traces))
    assert listed.returncode == 0, listed.stderr
    statuses = {run["run"]: (run["status"], run["problem"]) for run in json.loads(listed.stdout)}
    assert statuses["20260101T000000Z-trace-aaaaaa"] == ("ok", None)
    status, problem = statuses[bad.name]
    assert status == "unreadable" and words in problem
    table = harness.run("ls", str(traces))
    assert table.returncode == 0 and "unreadable" in table.stdout
    shown = harness.run("report", str(bad))
    assert shown.returncode == 2 and words in one_line(shown.stderr) and "Traceback" not in shown.stderr


@pytest.mark.parametrize("file_name, content, words", [
    ("kernel_trace.csv", "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\n",
     "no records"),
    ("numbers.json", "[1, 2, 3]", "no profiler output recognised"),  # a JSON array of no events: no trace
    ("trace.json", json.dumps({"traceEvents": [{"name": "k", "ph": "X", "ts": 1, "dur": None, "cat": "kernel",
                                                "pid": 1, "tid": 1}]}), "trace.json"),
])
def test_a_file_with_nothing_to_report_is_an_error_not_an_empty_report(harness, tmp_path, file_name, content, words):
    path = tmp_path / file_name
    path.write_text(content)
    shown = harness.run("report", str(path))
    assert shown.returncode == 2, (shown.returncode, shown.stdout, shown.stderr)
    assert words in one_line(shown.stderr) and "Traceback" not in shown.stderr


@pytest.mark.parametrize("args, words", [
    (["profile", "--timeout", "nan"], "positive number of seconds"),
    (["profile", "--timeout", "inf"], "positive number of seconds"),
    (["profile", "--timeout", "-1"], "positive number of seconds"),
    (["counters", "--set", "{tmp}", "--dry-run"], "is a folder"),
    (["counters", "--set", "{tmp}/binary.yaml", "--dry-run"], "binary.yaml"),
    (["counters", "--set", "{tmp}/bad_derived.yaml", "--dry-run"], "not a valid formula"),
    (["ls", "{tmp}/binary.yaml"], "is a file"),
    (["ls", "{tmp}/missing"], "does not exist"),
])
def test_bad_values_are_one_line_and_exit_2(harness, tmp_path, args, words):
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "bad_derived.yaml").write_text("description: bad\namd:\n  counters: [SQ_WAVES]\nderived:\n"
                                               "  amd:\n    broken: \"100 * (SQ_WAVES / \"\n")
    done = harness.run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in one_line(done.stderr) and "Traceback" not in done.stderr


def test_errors_stay_one_line_on_a_narrow_terminal(harness, tmp_path):
    """rich would wrap at the terminal's width; errors are written as one line whatever it is."""
    long_name = tmp_path / ("a-very-long-folder-name-" * 6) / "missing"
    for columns in ("20", "200"):
        env = dict(harness.env, COLUMNS=columns)
        off_terminal = subprocess.run(harness.argv("ls", str(long_name)), capture_output=True, text=True, env=env)
        assert off_terminal.returncode == 2 and str(long_name) in one_line(off_terminal.stderr)
        leader, follower = pty.openpty()  # stderr on a terminal
        try:
            on_terminal = subprocess.run(harness.argv("ls", str(long_name)), stdout=subprocess.PIPE, stderr=follower,
                                         env=env, timeout=60)
            os.close(follower)
            drawn = read_terminal(leader)
        finally:
            os.close(leader)
        text = drawn.decode().replace("\r\n", "\n")
        assert on_terminal.returncode == 2 and str(long_name) in one_line(text), text


def test_report_output_never_replaces_a_runs_own_files(harness, tmp_path):
    run = made_run(harness)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for target, extra in ((run / "manifest.json", []), (run / "manifest.json", ["--force"]),
                          (run / "summary.json", ["--force"]), (run / "raw" / "new.md", [])):
        done = harness.run("report", str(run), "--format", "md", "-o", str(target), *extra)
        assert done.returncode == 2 and "the run's own file" in one_line(done.stderr), done.stderr
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert harness.run("report", str(run)).returncode == 0


def test_report_output_refuses_existing_files_and_links_unless_forced(harness, tmp_path):
    run = made_run(harness)
    existing = tmp_path / "report.md"
    existing.write_text("my notes\n")
    done = harness.run("report", str(run), "--format", "md", "-o", str(existing))
    assert done.returncode == 2 and "--force" in one_line(done.stderr)
    assert existing.read_text() == "my notes\n"
    forced = harness.run("report", str(run), "--format", "md", "-o", str(existing), "--force")
    assert forced.returncode == 0 and existing.read_text() != "my notes\n"

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    link = tmp_path / "link.md"
    link.symlink_to(precious)
    done = harness.run("report", str(run), "--format", "md", "-o", str(link))
    assert done.returncode == 2 and "symbolic link" in one_line(done.stderr)
    forced = harness.run("report", str(run), "--format", "md", "-o", str(link), "--force")
    assert forced.returncode == 0 and not link.is_symlink() and precious.read_text() == "keep me\n"

    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "would-be-created.txt")
    done = harness.run("report", str(run), "--format", "md", "-o", str(dangling))
    assert done.returncode == 2 and not (tmp_path / "would-be-created.txt").exists()

    trace = tmp_path / "input.json"
    trace.write_text(json.dumps({"traceEvents": [{"name": "k", "ph": "X", "ts": 1, "dur": 5, "cat": "kernel",
                                                  "pid": 1, "tid": 1}]}))
    original = trace.read_text()
    done = harness.run("report", str(trace), "--format", "json", "-o", str(trace), "--force")
    assert done.returncode == 2 and "reads" in one_line(done.stderr) and trace.read_text() == original

    fresh = tmp_path / "fresh.html"
    done = harness.run("report", str(run), "--format", "html", "-o", str(fresh))
    assert done.returncode == 0 and fresh.read_text().lstrip().lower().startswith("<!doctype html")


def test_secret_looking_env_values_are_run_with_but_never_stored_or_shown(harness, tmp_path):
    traces = harness.traces()
    secret = "s3cr3t-value-123"
    done = harness.run("profile", "--json", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces),
                       "--env", f"API_TOKEN={secret}", "--env", f"DB_PASSWORD={secret}", "--env", "LEVEL=3", "--",
                       "sh", "-c", 'test "$API_TOKEN" = "$DB_PASSWORD" && echo "len=${#API_TOKEN} level=$LEVEL"')
    assert done.returncode == 0, done.stderr
    run = only_run(traces)
    assert "len=16 level=3" in (run / "stdout.log").read_text()  # the workload got the real values
    assert secret not in done.stdout
    for path in run.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    environment = manifest_of(run)["phases"][0]["environment"]
    assert environment["API_TOKEN"] == "<redacted>" and environment["LEVEL"] == "3"
    for dry in (["--json"], []):
        plan = harness.run("profile", "--dry-run", *dry, "--env", f"API_TOKEN={secret}", "--", "true")
        assert plan.returncode == 0 and secret not in plan.stdout and "<redacted>" in plan.stdout, plan.stdout
