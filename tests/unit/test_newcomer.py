"""What a newcomer meets after the first run (issue 18): help for every argument, tables that a log
can keep whole, progress on a terminal only, a built-in workload that finishes in seconds on a CPU,
bench scripts the docs run that can be run."""

import os
import pty
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO, read_terminal

PROFILECTL = [sys.executable, str(REPO / "tools/profilectl")]


def subcommands():
    import argparse

    from profilectl.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_argument_of_every_subcommand_has_a_description():
    import argparse
    missing = []
    for name, parser in subcommands().items():
        if not parser.description:
            missing.append(f"{name}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {action.option_strings or action.dest}")
    assert not missing, missing


@pytest.mark.parametrize("command", ["env-check", "profile", "counters", "trace", "ls", "report", "compare",
                                     "docker", "cluster"])
def test_help_of_each_subcommand_is_printed_and_names_its_arguments(command):
    done = subprocess.run([*PROFILECTL, command, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: profilectl " + command)
    for action in subcommands()[command]._actions:
        for option in action.option_strings:
            assert option in done.stdout, option


def test_docker_help_shows_the_forms_compose_run_takes():
    done = subprocess.run([*PROFILECTL, "docker", "--help"], capture_output=True, text=True, timeout=60)
    assert "profilectl docker profile --repeat 2 -- ./app" in done.stdout
    assert "docker compose -f docker-compose.profiling.yml run --rm SERVICE" in done.stdout


# ---- tables written off a terminal ------------------------------------------------------------

LONG_KERNEL = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
               "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")


def torch_trace_with_long_names(path: Path) -> None:
    import json
    events = [{"ph": "X", "cat": "kernel", "name": f"{LONG_KERNEL} #{i}", "pid": 0, "tid": 7, "ts": 1000.0 + i * 500,
               "dur": 295626.240 + i, "args": {"correlation": i}} for i in range(3)]
    path.write_text(json.dumps({"traceEvents": events}))


def test_off_a_terminal_no_number_or_id_is_split_across_lines(tmp_path):
    trace = tmp_path / "trace.json"
    torch_trace_with_long_names(trace)
    # COLUMNS=80 as a CI runner may export it: still no cell wraps off a terminal
    env = dict(os.environ, COLUMNS="80", PROFILECTL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([*PROFILECTL, "report", str(trace)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if "cunn_SoftMaxForward" in line and line.startswith("│")]
    assert len(rows) == 3, done.stdout  # one line per kernel, never a name folded over several
    for row in rows:  # the times whole on the kernel's own line
        assert re.search(r"\b295\.6\d* ms\b", row), row
    assert "\x1b[" not in done.stdout  # no colour codes in a log


def test_off_a_terminal_a_run_id_stays_on_one_line(tmp_path):
    traces = tmp_path / "a-rather-long-folder-name-for-the-traces-of-this-project" / "traces"
    done = subprocess.run([*PROFILECTL, "profile", "--traces-dir", str(traces), "--repeat", "1", "--warmup", "0",
                           "--no-sample", "--", sys.executable, "-c", "pass"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, COLUMNS="80"))
    assert done.returncode == 0, done.stderr
    (run,) = [p for p in traces.iterdir() if p.is_dir()]
    assert any(str(run) in line for line in done.stdout.splitlines()), done.stdout
    listed = subprocess.run([*PROFILECTL, "ls", str(traces)], capture_output=True, text=True, timeout=60)
    assert any(run.name in line for line in listed.stdout.splitlines()), listed.stdout


# ---- progress on a terminal only --------------------------------------------------------------

def run_on_a_terminal(argv, env, timeout=120):
    """argv with stdout and stderr on a pseudo-terminal (a user's terminal): what it drew, and its code."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    drawn = read_terminal(fd, timeout)
    _, status = os.waitpid(pid, 0)
    return drawn.decode(errors="replace"), os.waitstatus_to_exitcode(status)


def big_trace(path: Path, events: int = 200_000) -> None:
    with path.open("w") as out:
        out.write('{"traceEvents": [')
        out.write(",".join(f'{{"ph": "X", "cat": "kernel", "name": "k{i % 50}", "pid": 0, "tid": 7, '
                           f'"ts": {i * 10}, "dur": 5, "args": {{"correlation": {i}}}}}' for i in range(events)))
        out.write("]}")


def test_reading_a_trace_shows_progress_on_a_terminal_and_nothing_off_one(tmp_path):
    trace = tmp_path / "trace.json"
    big_trace(trace)
    env = dict(os.environ, TERM="xterm", PROFILECTL_CACHE_DIR=str(tmp_path / "cache-tty"))
    drawn, code = run_on_a_terminal([*PROFILECTL, "report", str(trace)], env)
    assert code == 0, drawn
    assert f"reading {trace.name}" in drawn
    off = subprocess.run([*PROFILECTL, "report", str(trace)], capture_output=True, text=True, timeout=120,
                         env=dict(env, PROFILECTL_CACHE_DIR=str(tmp_path / "cache-log")))
    assert off.returncode == 0 and off.stderr == "" and f"reading {trace.name}" not in off.stdout
    as_json, code = run_on_a_terminal([*PROFILECTL, "report", str(trace), "--format", "json"],
                                      dict(env, PROFILECTL_CACHE_DIR=str(tmp_path / "cache-json")))
    assert code == 0 and f"reading {trace.name}" not in as_json


# ---- the built-in workload --------------------------------------------------------------------

def test_the_built_in_workload_finishes_in_seconds_on_a_cpu():
    """On a host without a GPU (this one, like CI), with whatever the host Python has (NumPy, PyTorch
    on CPU, or neither)."""
    gpu_here = Path("/dev/kfd").exists() or any(Path("/dev").glob("nvidia[0-9]*"))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(REPO / "profiling/workloads/matmul.py"),
                           *(["--device", "cpu"] if gpu_here else [])], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "-cpu" in done.stdout and took < 20, (took, done.stdout)


def test_the_built_in_workload_sizes_itself_by_device():
    sys.path.insert(0, str(REPO / "profiling/workloads"))
    try:
        import matmul
    finally:
        sys.path.pop(0)
    cpu, gpu = matmul.default_size("cpu"), matmul.default_size("gpu")
    assert gpu >= 1024 and cpu <= 256  # the GPU's work as before; the CPU's takes well under a second
    assert matmul.default_size("cpu", requested=2048) == 2048  # --size wins


# ---- bench scripts the docs name --------------------------------------------------------------

def test_bench_scripts_named_in_the_docs_are_executable():
    docs = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    named = sorted(set(re.findall(r"\bbench/[\w./-]+\.(?:py|sh)\b", docs)))
    assert named
    scripts = sorted(str(p.relative_to(REPO)) for p in (REPO / "bench").glob("*") if p.suffix in (".py", ".sh"))
    for name in sorted(set(named) | set(scripts)):
        path = REPO / name
        if not path.is_file():
            continue  # a doc may name a script another change adds
        assert path.stat().st_mode & stat.S_IXUSR, f"{name} is not executable"
        assert path.read_text().startswith("#!"), f"{name} has no #! line"
