"""profilectl.settings: every PROFILECTL_* variable listed once, docs/settings.md made from the list,
and typed accessors that turn a bad value into one line naming the variable (issue 35)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl import errors, settings
from profilectl.settings import SettingError
from support import REPO

NAME = re.compile(r"PROFILECTL_[A-Z0-9][A-Z0-9_]*")
# Where the variables are read or set: the package, and what users run around it.
PLACES = ("src", "docker", "tools", "examples")
ROOT_FILES = ("docker-compose.profiling.yml",)


def _text_files(top: Path):
    for path in sorted(top.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                yield path, path.read_text(errors="ignore")
            except OSError:
                continue


def names_in_use() -> dict[str, str]:
    """Every PROFILECTL_ name in src/, docker/, tools/, examples/ (and the compose file): name -> a file."""
    found: dict[str, str] = {}
    files = [f for place in PLACES for f in _text_files(REPO / place)]
    files += [(REPO / name, (REPO / name).read_text()) for name in ROOT_FILES if (REPO / name).is_file()]
    for path, text in files:
        for name in NAME.findall(text):
            found.setdefault(name.rstrip("_"), str(path.relative_to(REPO)))
    return found


def test_every_variable_in_use_is_listed():
    missing = {name: where for name, where in names_in_use().items() if name not in settings.BY_NAME}
    assert missing == {}, "add these to src/profilectl/settings.py SETTINGS (then regenerate docs/settings.md)"


def test_the_scan_sees_the_variables_of_each_place():
    found = names_in_use()
    assert "PROFILECTL_MAX_SNAPSHOT_BYTES" in found  # src
    assert "PROFILECTL_HOOK_DEBUG" in found  # the start-up hook
    assert "PROFILECTL_SLURM_KEEP_IMAGE" in found  # docker/slurm
    assert "PROFILECTL_SCRATCH" in found  # examples


def test_each_variable_is_listed_once_with_a_known_type_and_a_meaning():
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    for s in settings.SETTINGS:
        assert NAME.fullmatch(s.name), s.name
        assert s.kind in settings.KINDS, s
        assert s.meaning and "\n" not in s.meaning and s.readers, s
        assert (s.kind == "choice") == bool(s.choices), s
        if s.kind == "choice" and s.default is not None:
            assert s.default in s.choices, s


def test_docs_settings_md_is_the_modules_table():
    doc = (REPO / "docs" / "settings.md").read_text()
    assert doc == settings.document(), "regenerate: .venv/bin/python -m profilectl.settings > docs/settings.md"
    for s in settings.SETTINGS:
        assert f"`{s.name}`" in doc


def test_the_defaults_are_those_the_readers_use():
    from profilectl import cache_folder, console, runner
    from profilectl.backends.timing import RepeatSizing
    from profilectl.formats import chrome_io, nccl_inspector, torch_memory
    from profilectl.read import partials
    from profilectl.report import query
    expected = {
        "PROFILECTL_MAX_SNAPSHOT_BYTES": torch_memory.MAX_BYTES,
        "PROFILECTL_MAX_INSPECTOR_BYTES": nccl_inspector.MAX_BYTES,
        "PROFILECTL_MAX_PARTIAL_BYTES": partials.MAX_BYTES,
        "PROFILECTL_MAX_INFLATE_RATIO": chrome_io.MAX_INFLATE_RATIO,
        "PROFILECTL_MAX_INFLATED_BYTES": chrome_io.MAX_INFLATED_BYTES,
        "PROFILECTL_MAX_EVENT_BYTES": chrome_io.MAX_EVENT_BYTES,
        "PROFILECTL_CACHE_MAX_MB": cache_folder.DEFAULT_MAX_MB,
        "PROFILECTL_OUTPUT_WAIT_S": console.OUTPUT_WAIT_S,
        "PROFILECTL_FOLDER_WAIT_S": runner.FOLDER_WAIT_S,
        "PROFILECTL_REPEAT_BUDGET_S": RepeatSizing.budget_s,
        "PROFILECTL_QUERY_TIMEOUT_S": query.DEFAULT_TIMEOUT_S,
        "PROFILECTL_QUERY_MEMORY_MB": query.DEFAULT_MEMORY_MB,
    }
    assert {name: settings.setting(name).default for name in expected} == expected


def test_typed_accessors():
    env = {"PROFILECTL_MAX_SNAPSHOT_BYTES": "100", "PROFILECTL_NO_JOB": "yes", "PROFILECTL_JOB_WAIT_S": "2.5",
           "PROFILECTL_TRACES_DIR": "/tmp/t", "PROFILECTL_BASE_IMAGE": " ", "PROFILECTL_STEP_ACTION": "roctx"}
    assert settings.get_int("PROFILECTL_MAX_SNAPSHOT_BYTES", env) == 100
    assert settings.get_bool("PROFILECTL_NO_JOB", env) is True
    assert settings.get_bool("PROFILECTL_JOB_SCRATCH", env) is False  # unset: the default
    assert settings.get_float("PROFILECTL_JOB_WAIT_S", env) == 2.5
    assert settings.get_float("PROFILECTL_JOB_WAIT_S", {}) == 15.0
    assert settings.get_path("PROFILECTL_TRACES_DIR", env) == Path("/tmp/t")
    assert settings.get_path("PROFILECTL_TRACES_DIR", {}) == Path("traces")
    assert settings.get_str("PROFILECTL_BASE_IMAGE", env) is None  # blank is unset
    assert settings.get_str("PROFILECTL_STEP_ACTION", env) == "roctx"
    assert settings.get_limit("PROFILECTL_MAX_SNAPSHOT_BYTES", {"PROFILECTL_MAX_SNAPSHOT_BYTES": "0"}) == settings.NO_LIMIT
    with pytest.raises(TypeError):
        settings.get_int("PROFILECTL_NO_JOB", env)  # a bool setting: the caller's mistake
    with pytest.raises(KeyError):
        settings.get("PROFILECTL_NOT_A_SETTING")


@pytest.mark.parametrize("name, value, accepts", [
    ("PROFILECTL_MAX_SNAPSHOT_BYTES", "1e3", "a whole number"),
    ("PROFILECTL_JOB_WAIT_S", "soon", "a number"),
    ("PROFILECTL_CACHE_MAX_MB", "-1", "a number, 0 or more"),
    ("PROFILECTL_QUERY_TIMEOUT_S", "inf", "a number, 0 or more"),
    ("PROFILECTL_NO_JOB", "maybe", "1/true/yes/on or 0/false/no/off"),
    ("PROFILECTL_STEP_ACTION", "gdb", "one of torch, torch-range"),
    ("PROFILECTL_HOST_UID", "alice", "a whole number, 0 or more"),
])
def test_a_bad_value_is_one_line_naming_the_variable(name, value, accepts):
    with pytest.raises(SettingError) as caught:
        settings.get(name, {name: value})
    message = str(caught.value)
    assert isinstance(caught.value, errors.UsageError) and caught.value.exit_code == errors.USAGE
    assert name in message and repr(value) in message and accepts in message and "\n" not in message


def test_lenient_reads_give_the_default():
    env = {"PROFILECTL_FOLDER_WAIT_S": "x"}
    assert settings.get_float_or_default("PROFILECTL_FOLDER_WAIT_S", env) == 30.0


def test_a_bad_value_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, PROFILECTL_CACHE_MAX_MB="lots", PROFILECTL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(REPO / "tests/fixtures/kineto")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == errors.USAGE, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "PROFILECTL_CACHE_MAX_MB='lots'" in done.stderr


def _report_with(tmp_path, name: str, value: str) -> subprocess.CompletedProcess:
    """`report` of a small fixture with one variable set (its cache under tmp_path)."""
    env = dict(os.environ, PROFILECTL_CACHE_DIR=str(tmp_path / "cache"), **{name: value})
    argv = [sys.executable, str(REPO / "tools/profilectl"), "report", str(REPO / "tests/fixtures/rocprofv3-docs")]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def test_a_bad_value_no_path_reads_still_ends_the_command(tmp_path):
    """A small report never reads PROFILECTL_NO_PARALLEL (nothing to read in parallel): its typo is
    still one line and exit 2, at the start, where before the command passed it unseen."""
    done = _report_with(tmp_path, "PROFILECTL_NO_PARALLEL", "maybe")
    assert done.returncode == errors.USAGE, (done.stdout, done.stderr)
    assert done.stderr.strip() == ("profilectl: $PROFILECTL_NO_PARALLEL='maybe': not 1/true/yes/on or 0/false/no/off "
                                   "(read large traces and many files in one process)")
    assert not done.stdout and not (tmp_path / "cache").exists()
    assert _report_with(tmp_path, "PROFILECTL_NO_PARALLEL", "yes").returncode == errors.OK


def test_a_value_read_leniently_later_is_refused_at_the_start(tmp_path):
    """PROFILECTL_OUTPUT_WAIT_S is read as a finished run's last output goes out, where no error can
    be said (the default there): the command's start says it instead, and its meaning no longer
    promises the default."""
    env = dict(os.environ, PROFILECTL_OUTPUT_WAIT_S="later", PROFILECTL_TRACES_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "ls"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == errors.USAGE and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "PROFILECTL_OUTPUT_WAIT_S='later': not a number" in done.stderr and "the default" not in done.stderr
    assert settings.get_float_or_default("PROFILECTL_OUTPUT_WAIT_S", {"PROFILECTL_OUTPUT_WAIT_S": "later"}) == 10.0


def test_check_environment_parses_every_listed_setting_that_is_set():
    settings.check_environment({"PROFILECTL_NO_JOB": "on", "PROFILECTL_JOB_WAIT_S": "2.5", "PROFILECTL_UNLISTED": "x"})
    for name, value, _ in [("PROFILECTL_JOB_WAIT_S", "soon", ""), ("PROFILECTL_STEP_ACTION", "gdb", "")]:
        with pytest.raises(SettingError, match=name):
            settings.check_environment({"PROFILECTL_NO_JOB": "on", name: value})


def test_a_numpy_switch_numpy_cannot_read_is_one_line(tmp_path):
    """NUMPY_MADVISE_HUGEPAGE is numpy's, read as it is imported: a value that is not a whole number
    stopped that import with a traceback; now the command's start says so in one line, exit 2."""
    done = _report_with(tmp_path, "NUMPY_MADVISE_HUGEPAGE", "abc")
    assert done.returncode == errors.USAGE, (done.stdout, done.stderr)
    assert done.stderr.strip() == ("profilectl: $NUMPY_MADVISE_HUGEPAGE='abc': not a whole number (numpy's "
                                   "huge-page hint: 0 off, 1 on; unset: numpy's default)")
    assert _report_with(tmp_path, "NUMPY_MADVISE_HUGEPAGE", "0").returncode == errors.OK

