"""Names are data, not markup: whoever wrote a trace names its kernels, and a workload names itself.
A kernel called `void kernel<[/bold]>(float*)` is rich markup; one carrying an OSC 52 sequence sets
the reader's clipboard, `ESC [2J` clears the screen, a C1 CSI does the same on terminals that take
it. Every command that prints them (report, query, ls, compare, the one-line errors) shows them as
text, on a pipe and on a real pseudo-terminal; Markdown and HTML escape them their own way."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from reliability_support import one_line, only_run
from support import read_terminal

MARKUP = "void kernel<[/bold]>(float*) :cat: [red]"
CLIPBOARD = "evil\x1b]52;c;cHduZWQ=\x07"  # OSC 52: put "pwned" on the reader's clipboard
CLEAR = "clear\x1b[2J\x1b[H\x9b31m\u202eright-to-left"  # erase the screen, home, a C1 CSI, a bidi override
NAMES = (MARKUP, CLIPBOARD, CLEAR, "plain_kernel")
RAW = (b"\x1b]52", b"\x1b[2J", b"\x07", b"\xc2\x9b", "\u202e".encode())  # none of these may reach the reader


def hostile_trace(folder: Path, scale: int = 1) -> Path:
    events = [{"name": name, "ph": "X", "ts": 10 + 10 * i, "dur": 5 * scale, "cat": "kernel", "pid": 1, "tid": 1,
               "args": {"device": 0, "stream": 7}} for i, name in enumerate(NAMES)]
    path = folder / f"trace{scale}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def raw_controls(output: bytes) -> list[bytes]:
    return [sequence for sequence in RAW if sequence in output]


def on_terminal(harness, *args: str) -> tuple[int, bytes]:
    """profilectl with stdout and stderr on a pseudo-terminal (colours on, as a user sees it)."""
    leader, follower = pty.openpty()
    try:
        env = dict(harness.env, COLUMNS="200", TERM="xterm-256color")
        env.pop("NO_COLOR", None)
        process = subprocess.Popen(harness.argv(*args), stdout=follower, stderr=follower, env=env,
                                   cwd=harness.tmp_path)
        os.close(follower)
        drawn = read_terminal(leader, timeout=120)
        return process.wait(timeout=60), drawn
    finally:
        os.close(leader)


def test_report_and_query_show_hostile_kernel_names_as_text(harness, tmp_path):
    trace = hostile_trace(tmp_path)
    for args in (("report", str(trace)), ("query", str(trace), "SELECT name, calls FROM kernels")):
        done = subprocess.run(harness.argv(*args), capture_output=True, env=harness.env, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        assert b"Traceback" not in done.stderr
        assert b"void kernel<[/bold]>(float*) :cat: [red]" in done.stdout  # the name itself, not markup or emoji
        assert b"evil\\u001b]52;c;cHduZWQ=\\u0007" in done.stdout  # shown, escaped
        assert raw_controls(done.stdout + done.stderr) == [], args
        code, drawn = on_terminal(harness, *args)
        assert code == 0 and b"Traceback" not in drawn, drawn[-2000:]
        assert b"\x1b[" in drawn  # rich saw a terminal: its own colours are there, the names' sequences are not
        assert raw_controls(drawn) == [], (args, raw_controls(drawn))


def test_csv_and_markdown_printed_on_a_terminal_escape_control_characters(harness, tmp_path):
    trace = hostile_trace(tmp_path)
    for args in (("report", str(trace), "--format", "csv"), ("report", str(trace), "--format", "md"),
                 ("query", str(trace), "SELECT name FROM kernels", "--format", "csv")):
        code, drawn = on_terminal(harness, *args)
        assert code == 0, drawn[-2000:]
        assert raw_controls(drawn) == [], (args, raw_controls(drawn))


def test_markdown_and_html_files_escape_names_their_own_way(harness, tmp_path):
    trace = hostile_trace(tmp_path)
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    for fmt, target in (("md", md), ("html", html)):
        done = harness.run("report", str(trace), "--format", fmt, "-o", str(target))
        assert done.returncode == 0, done.stderr
    markdown = md.read_text()
    assert "void kernel\\<\\[/bold\\]\\>(float\\*) :cat: \\[red\\]" in markdown  # neither HTML nor a link nor emphasis
    assert raw_controls(markdown.encode()) == []
    page = html.read_text()
    assert "void kernel&lt;[/bold]&gt;(float*)" in page and "<[/bold]>" not in page


def test_ls_and_compare_show_hostile_names_as_text(harness, tmp_path):
    traces = harness.traces()
    done = harness.run("profile", "--no-sample", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--",
                       "sh", "-c", "true", MARKUP, CLIPBOARD)
    assert done.returncode == 0, done.stderr
    assert raw_controls(done.stdout.encode() + done.stderr.encode()) == []
    listed = subprocess.run(harness.argv("ls", str(traces)), capture_output=True, env=harness.env, timeout=60)
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr, listed.stderr.decode()
    assert b"[/bold]" in listed.stdout and raw_controls(listed.stdout) == []
    shown = subprocess.run(harness.argv("report", str(only_run(traces))), capture_output=True, env=harness.env,
                           timeout=60)
    assert shown.returncode == 0 and raw_controls(shown.stdout + shown.stderr) == [], shown.stderr.decode()
    a, b = hostile_trace(tmp_path, 1), hostile_trace(tmp_path, 2)
    compared = subprocess.run(harness.argv("compare", str(a), str(b)), capture_output=True, env=harness.env,
                              timeout=120)
    assert compared.returncode == 0 and b"Traceback" not in compared.stderr, compared.stderr.decode()
    assert b"void kernel<[/bold]>" in compared.stdout and raw_controls(compared.stdout) == []


def test_a_one_line_error_shows_a_hostile_file_name_as_text(harness, tmp_path):
    missing = tmp_path / f"missing{CLIPBOARD}{CLEAR}.json"
    done = subprocess.run(harness.argv("report", str(missing)), capture_output=True, env=harness.env, timeout=60)
    assert done.returncode == 2
    line = one_line(done.stderr.decode(errors="replace"))
    assert "\\u001b]52" in line and raw_controls(done.stderr) == [], line
