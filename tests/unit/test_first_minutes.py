"""What a new user meets in the first ten minutes (issue 39): operator tables by self time with shares
that add up, steps and user ranges apart, a line on where the time goes for every report, run ids as
`ls` prints them (and `latest`) wherever a run is taken, "did you mean", --quiet, notes said once,
env-check that agrees with itself on a machine without a GPU, one number style, and an HTML page to
send. Real processes and files throughout."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, read_terminal

PROFILECTL = [sys.executable, str(REPO / "tools/profilectl")]


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 180):
    return subprocess.run([*PROFILECTL, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)


def on_a_terminal(argv: list[str], columns: int, cwd: Path, env: dict[str, str] | None = None) -> str:
    """argv on a pseudo-terminal `columns` wide: what it drew, colour codes removed."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execve(argv[0], argv, dict(os.environ, COLUMNS=str(columns), LINES="50", **(env or {})))
    drawn = read_terminal(fd, 120).decode(errors="replace")
    os.waitpid(pid, 0)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn).replace("\r", "")


def nested_trace(path: Path, legacy: bool = False) -> Path:
    """One training step as torch writes it: ProfilerStep#0 holds a record_function("forward") range,
    which holds aten::linear (100 µs), which holds aten::addmm (80 µs), which holds aten::mm (60 µs).
    `legacy`: the autograd profiler's export (torch without Kineto): no categories, pid "CPU functions"."""
    spans = [("ProfilerStep#0", "user_annotation", 0, 200), ("forward", "user_annotation", 10, 150),
             ("aten::linear", "cpu_op", 20, 100), ("aten::addmm", "cpu_op", 30, 80), ("aten::mm", "cpu_op", 40, 60),
             ("aten::relu", "cpu_op", 130, 20)]
    events = []
    for name, category, start, duration in spans:
        event = {"ph": "X", "name": name, "ts": 1000 + start, "dur": duration, "tid": 1, "args": {}}
        if legacy:
            event["pid"] = "CPU functions"
        else:
            event.update(cat=category, pid=7)
        events.append(event)
    path.write_text(json.dumps(events if legacy else {"traceEvents": events}))
    return path


def section(document: dict, key: str) -> dict:
    return next(s for s in document["sections"] if s["key"] == key)


def rows(table: dict) -> list[dict]:
    return table["rows"]


# ---- operators by self time, steps and ranges apart, where the time goes ------------------------

@pytest.mark.parametrize("legacy", [False, True])
def test_operators_by_self_time_with_shares_that_add_up_and_steps_apart(tmp_path, legacy):
    trace = nested_trace(tmp_path / "trace.json", legacy)
    done = cli("report", str(trace), "--format", "json", env={"PROFILECTL_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    operators = {r["name"]: r for r in report["operators"]}
    assert "ProfilerStep#0" not in operators  # a step, even in the legacy export that has no categories
    if not legacy:  # with categories, a record_function range is a range, not an operator
        assert "forward" not in operators
    names = [r["name"] for r in report["operators"]]
    assert names[0] == "aten::mm"  # the most self time first (not aten::linear, the longest inclusive total)
    assert [r["self_ns"] for r in report["operators"]] == sorted((r["self_ns"] for r in report["operators"]), reverse=True)
    assert operators["aten::mm"]["self_ns"] == 60_000 and operators["aten::addmm"]["self_ns"] == 20_000
    assert operators["aten::linear"]["self_ns"] == 20_000 and operators["aten::linear"]["total_ns"] == 100_000
    assert sum(r["percent"] for r in report["operators"]) == pytest.approx(100.0)  # of the sum of self times
    whole = sum(r["self_ns"] for r in report["operators"])
    assert operators["aten::mm"]["percent"] == pytest.approx(100.0 * 60_000 / whole)
    steps = section(report, "annotations")
    by_key = {t["key"]: t for t in steps["tables"]}
    assert [r["name"] for r in rows(by_key["profiler_steps"])] == ["ProfilerStep#0"]
    if not legacy:
        assert [r["name"] for r in rows(by_key["annotations"])] == ["forward"]
    assert report["headline"].startswith("no GPU activity recorded") and "aten::mm" in report["headline"]


def test_every_report_says_where_the_time_goes_first(tmp_path, fixtures):
    env = {"PROFILECTL_CACHE_DIR": str(tmp_path / "cache")}
    gpu = cli("report", str(fixtures / "nvidia-h200"), env=env)
    assert gpu.returncode == 0, gpu.stderr
    lines = gpu.stdout.splitlines()
    first = lines.index("Where the time goes")  # after the title and metadata, before every section
    assert lines[first + 1].startswith("  GPU time 13.35 ms in the whole trace: kernels 100.0 % (5 dispatches of 1 kernel; heaviest ")
    cpu = cli("report", str(nested_trace(tmp_path / "cpu.json")), "--format", "md", env=env)
    assert "**Where the time goes:** no GPU activity recorded" in cpu.stdout
    assert "the trace holds no GPU activity" not in cpu.stdout  # said once, by the headline


def test_compare_of_cpu_traces_adds_self_times_not_nested_totals(tmp_path):
    base = nested_trace(tmp_path / "a.json")
    trace = json.loads(base.read_text())
    for event in trace["traceEvents"]:
        if event["name"] == "aten::relu":
            event["dur"] = 30  # 10 µs more of the run's own operator time
        if event["name"] == "aten::mm":
            event["dur"] = 70  # longer inside an addmm of the same length: addmm's own time is 10 µs less
    new = tmp_path / "b.json"
    new.write_text(json.dumps(trace))
    done = cli("compare", str(base), str(new), "--format", "json", env={"PROFILECTL_CACHE_DIR": str(tmp_path / "c")})
    assert done.returncode == 0, done.stderr
    operators = {r["name"]: r for r in json.loads(done.stdout)["operators"]}
    assert (operators["aten::mm"]["self_ns_a"], operators["aten::mm"]["self_ns_b"]) == (60_000, 70_000)
    assert (operators["aten::addmm"]["self_ns_a"], operators["aten::addmm"]["self_ns_b"]) == (20_000, 10_000)
    assert operators["aten::addmm"]["total_ns_a"] == operators["aten::addmm"]["total_ns_b"] == 80_000
    table = cli("compare", str(base), str(new), env={"PROFILECTL_CACHE_DIR": str(tmp_path / "c")})
    # 60 + 20 + 20 + 20 µs of operators' own time: never 60 + 80 + 100 + 20 (nested totals added up)
    assert "compared by self time" in table.stdout and "120.0 µs → 130.0 µs" in table.stdout, table.stdout


# ---- run ids and latest -------------------------------------------------------------------------

def test_the_id_ls_prints_and_latest_are_taken_wherever_a_run_is(tmp_path):
    env = {"PROFILECTL_TRACES_DIR": str(tmp_path / "traces"), "PROFILECTL_CACHE_DIR": str(tmp_path / "cache")}
    made_in_order: list[str] = []
    for _ in range(2):
        made = cli("profile", "--repeat", "1", "--warmup", "0", "--no-sample", "--quiet", "--", sys.executable, "-c",
                   "print('from the workload')", cwd=tmp_path, env=env)
        assert made.returncode == 0, made.stderr
        assert "from the workload" not in made.stdout + made.stderr  # --quiet: in stdout.log only
        # two runs in one second: their names sort by the random suffix, not by time
        made_in_order += sorted({p.name for p in (tmp_path / "traces").iterdir()} - set(made_in_order))
    older, newer = made_in_order
    assert "from the workload" in (tmp_path / "traces" / newer / "stdout.log").read_text()
    listed = cli("ls", "--json", cwd=tmp_path, env=env)
    assert [r["run"] for r in json.loads(listed.stdout)] == [newer, older]
    elsewhere = tmp_path / "elsewhere"  # ids resolve under the traces folder, not the current one
    elsewhere.mkdir()
    for args in (["report", older, "--format", "json"], ["query", older, "SELECT COUNT(*) AS n FROM timing",
                                                         "--format", "json"], ["compare", older, "latest"]):
        done = cli(*args, cwd=elsewhere, env=env)
        assert done.returncode == 0, (args, done.stderr)
    latest = json.loads(cli("report", "latest", "--format", "json", cwd=elsewhere, env=env).stdout)
    assert latest["source"]["path"].endswith(newer)
    gone = cli("report", "20990101T000000Z-trace-000000", cwd=elsewhere, env=env)
    assert gone.returncode == 2 and "`profilectl ls` lists the runs" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1
    empty = cli("report", "latest", cwd=tmp_path, env={"PROFILECTL_TRACES_DIR": str(tmp_path / "none")})
    assert empty.returncode == 2 and "latest: no run in" in empty.stderr


@pytest.mark.parametrize("columns", [120, 80])
def test_ls_never_wraps_a_run_id_on_a_terminal(tmp_path, columns):
    traces = tmp_path / "traces"
    env = {"PROFILECTL_TRACES_DIR": str(traces), "PROFILECTL_CACHE_DIR": str(tmp_path / "cache")}
    made = cli("profile", "--repeat", "1", "--warmup", "0", "--no-sample", "--", sys.executable, "-c",
               "import time; time.sleep(0.01)  # a workload whose command line is long enough to wrap " + "x" * 80,
               cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    (run,) = [p.name for p in traces.iterdir()]
    drawn = on_a_terminal([*PROFILECTL, "ls"], columns, tmp_path, env)
    assert any(run in line for line in drawn.splitlines()), drawn  # whole, on one line
    assert all(len(line) <= columns for line in drawn.splitlines()), drawn


# ---- typos and empty folders --------------------------------------------------------------------

def test_a_mistyped_option_gets_did_you_mean(tmp_path):
    done = cli("report", str(tmp_path), "--fromat", "html")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "unrecognized arguments: --fromat html; did you mean --format" in line
    choice = cli("report", str(tmp_path), "--format", "htm")
    assert choice.returncode == 2 and "did you mean html?" in choice.stderr


def test_an_empty_folder_says_what_report_reads(tmp_path):
    done = cli("report", str(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "the folder is empty" in line and "torch.profiler" in line and "Nsight Compute CSV" in line
    assert "rocprofv3-csv, rocpd" not in line and "readers:" not in line  # not the internal reader names


# ---- notes, number style, wrapping --------------------------------------------------------------

def test_a_cpu_run_says_each_thing_once(tmp_path):
    """A profile run on a machine without a GPU (this one, or a fake root without one): no note
    about sampling nothing or about running as oneself, the repeats' sizing said once, the run
    directory named once."""
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    env = {"PROFILECTL_PROBE_ROOT": str(root), "PROFILECTL_TRACES_DIR": str(tmp_path / "traces"),
           "PROFILECTL_CACHE_DIR": str(tmp_path / "cache")}
    done = cli("profile", "--warmup", "1", "--", sys.executable, "-c", "pass", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (run,) = [p for p in (tmp_path / "traces").iterdir()]
    assert done.stdout.count(run.name) == 1, done.stdout
    notes = json.loads((run / "manifest.json").read_text())["notes"]
    assert not [n for n in notes if "power sampling" in n or n.startswith("privileges:")], notes
    assert [n for n in notes if "timed run(s)" in n] and not [n for n in notes if n.startswith("repeats sized")], notes
    report = cli("report", "latest", env=env)
    assert report.stdout.count("timed run(s)") == 1


def test_wrapped_notes_keep_their_indent():
    from rich.console import Console

    from profilectl.model.document import Document, Section
    from profilectl.report.renderers import terminal
    console = Console(record=True, width=50)
    note = "a note long enough to wrap over several lines of a narrow terminal, all of them indented"
    terminal.render(console, Document(title="t", metadata=(), sections=(Section("notes", "Notes", notes=(note,)),)))
    lines = [line for line in console.export_text().splitlines() if line.strip() and line.strip() not in ("t", "Notes")]
    assert len(lines) > 1 and all(line.startswith("  ") and not line.startswith("   ") for line in lines), lines


def test_one_number_style():
    from profilectl.model import units
    assert [units.duration_ns(v) for v in (191e6, 190.64e6, 3e6, 1234)] == ["191.0 ms", "190.6 ms", "3.000 ms",
                                                                          "1.234 µs"]
    assert units.number(1234567) == "1234567" and units.percent(25) == "25.0 %" and units.watts(1234.5) == "1234.5 W"


# ---- env-check on a machine without a GPU -------------------------------------------------------

def test_env_check_without_a_gpu_agrees_with_itself_and_fixes_nothing_vendor_specific(machine):
    machine.python_with_torch("1.13.0a0", hip=None, cuda=None)  # PyTorch for the CPU
    report = machine.probe()
    tracing = report.assessment.capabilities["tracing"]
    trace = report.assessment.services["trace"]
    assert trace.backend == "torch" and tracing.backend == "torch"
    assert "trace still works: torch.profiler records the CPU side" in tracing.reason
    assert "falls back" not in tracing.reason
    for name, verdict in report.assessment.capabilities.items():
        assert not re.search(r"rocprofiler-sdk|ROCm|Nsight|nsys|install .*(AMD|NVIDIA)", verdict.fix or ""), (name, verdict)


# ---- the HTML page ------------------------------------------------------------------------------

def test_the_html_page_leads_with_the_run_the_answer_and_the_findings(fixtures, tmp_path):
    done = cli("report", str(fixtures / "nvidia-h200"), "--format", "html",
               env={"PROFILECTL_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    page = done.stdout
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    assert title.startswith("profilectl — ") and "nvidia-h200" in title
    headline, finding, metadata = (page.index('class="headline"'), page.index('class="finding"'),
                                   page.index('class="metadata"'))
    assert headline < finding < metadata < page.index("<h2")
    headings = re.findall(r"<h[23][^>]*>(.*?)</h[23]>", page)
    assert len(headings) == len(set(headings)), headings
    assert page.count('class="finding"') == 1  # shown first, not again in its section


def test_html_to_a_terminal_is_written_to_a_file(tmp_path):
    trace = nested_trace(tmp_path / "trace.json")
    drawn = on_a_terminal([*PROFILECTL, "report", str(trace), "--format", "html"], 120, tmp_path,
                          {"PROFILECTL_CACHE_DIR": str(tmp_path / "cache")})
    page = tmp_path / "trace.json.report.html"
    assert page.is_file() and page.read_text().startswith("<!DOCTYPE html>")
    assert f"wrote {page.name}" in drawn and "<html" not in drawn


# ---- the compose route: an image without what the workload needs ----------------------------------

def test_in_a_container_a_missing_module_names_the_image_to_build_on(machine):
    from cli_support import cli as fake_cli
    machine.container()
    machine.tool("python3", "")  # the image's Python: no PyTorch
    planned = json.loads(fake_cli(machine, "trace", "--dry-run", "--json", "--", "python3", "train.py").stdout)
    assert planned["backend"] == "timing"
    (said,) = [n for n in planned["notes"] if n.startswith("this image has no PyTorch")]
    assert "PROFILECTL_BASE_IMAGE=profilectl-base:bookworm-torch" in said and "build.sh --torch" in said
    done = fake_cli(machine, "profile", "--json", "--repeat", "1", "--warmup", "0", "--no-sample", "--", sys.executable,
                    "-c", "raise ModuleNotFoundError(\"No module named 'torch'\")")  # as `import torch` fails
    result = json.loads(done.stdout)
    assert done.returncode == result["exit_code"] == 1 and result["status"] == "failed"
    assert "the workload needs the Python module 'torch', which this image lacks" in result["message"]
    assert "PROFILECTL_BASE_IMAGE=profilectl-base:bookworm-torch" in result["message"]
