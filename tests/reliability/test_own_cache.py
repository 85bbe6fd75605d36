"""A cache only under the running user's own home, never read where another user could write, and
bounded. Root runs `report` with a real user's environment (sudo -E, runuser without -l: $HOME is the
user's): the user had planted a report text at the cache key anyone can compute, and root must
neither print it nor leave anything of its own in the user's home. A cache folder or entry another
user owns is never read; the cache stays within $PROFILECTL_CACHE_MAX_MB, the entries used longest
ago going first."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from attacker import as_user, reachable_folder, users_folder
from support import REPO

STRAGGLER = REPO / "tests/fixtures/diagnosis/straggler"
PLANTED = "PLANTED: the user's text, printed by root\n"


@pytest.fixture
def base():
    with reachable_folder("profilectl-cache-") as folder:
        yield folder


def environment(harness, **changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in harness.env.items() if k not in ("PROFILECTL_CACHE_DIR", "XDG_CACHE_HOME")}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def report_key(env: dict[str, str], cwd: Path, path: str) -> str:
    """The cache key of `report PATH --format json` run with `env` in `cwd`, stdout a pipe: what
    anyone can compute with profilectl's own code (render_cache.key)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from profilectl.report import render_cache; "
            "print(render_cache.key(sys.argv[2], 'json', 10))")
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "src"), path], env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def plant(user: tuple[int, int], folder: Path, name: str) -> None:
    """As the user: the planted text at `folder`/name (folders made as the user where missing)."""
    def work() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(PLANTED)
    as_user(user, work)


def owners(top: Path) -> dict[str, int]:
    return {str(p): os.lstat(p).st_uid for p in [top, *top.rglob("*")]}


def report(harness, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    harness.env = env
    return harness.run("report", str(STRAGGLER), "--format", "json", cwd=cwd, timeout=300)


def test_root_with_a_users_home_neither_prints_the_users_text_nor_writes_there(user, base, harness):
    """sudo -E: root's $HOME is the user's. Before: root read the user's ~/.cache/profilectl and printed
    the text planted at the report's key, and left root-owned folders there. Now the cache is root's
    own (its home from the password database), the user's is never looked at."""
    home = users_folder(base, "home", user)
    env = environment(harness, HOME=str(home))
    key = report_key(env, base, str(STRAGGLER))
    plant(user, home / ".cache" / "profilectl" / "reports", f"{key}.txt")
    before = owners(home)
    own_cache = Path(pwd.getpwuid(os.geteuid()).pw_dir) / ".cache" / "profilectl"
    kept = set(own_cache.rglob("*")) if own_cache.is_dir() else set()
    try:
        done = report(harness, env, base)
        again = report(harness, env, base)  # from root's own cache now, where it was kept
    finally:  # root's own entries of this scenario go again
        for made in (set(own_cache.rglob("*")) - kept if own_cache.is_dir() else set()):
            if made.is_file():
                made.unlink()
    for result in (done, again):
        assert result.returncode == 0, result.stderr
        assert "PLANTED" not in result.stdout, "root printed the text the user planted at the cache key"
        assert json.loads(result.stdout)["kernels"]
    assert owners(home) == before, "root wrote into the user's home"


def test_a_cache_folder_of_another_user_is_not_used(user, base, harness):
    """$PROFILECTL_CACHE_DIR names a folder the user owns (and filled): root uses no cache, says so once,
    and prints its own report."""
    cache = users_folder(base, "cache", user)
    env = environment(harness, PROFILECTL_CACHE_DIR=str(cache))
    plant(user, cache / "reports", f"{report_key(env, base, str(STRAGGLER))}.txt")
    before = owners(cache)
    done = report(harness, env, base)
    assert done.returncode == 0, done.stderr
    assert "PLANTED" not in done.stdout and json.loads(done.stdout)["kernels"]
    assert f"the cache folder {cache} belongs to uid {user[0]}" in done.stderr, done.stderr
    assert owners(cache) == before


def test_an_entry_of_another_user_in_roots_cache_is_never_read(user, base, harness):
    """Root's own cache folder whose reports/ someone made writable by all (0777): the entry the user
    put there at the report's key is not read, root's report is printed (and kept as root's own)."""
    cache = base / "root-cache"
    (cache / "reports").mkdir(parents=True)
    (cache / "reports").chmod(0o777)
    env = environment(harness, PROFILECTL_CACHE_DIR=str(cache))
    key = report_key(env, base, str(STRAGGLER))
    plant(user, cache / "reports", f"{key}.txt")
    done = report(harness, env, base)
    assert done.returncode == 0, done.stderr
    assert "PLANTED" not in done.stdout and json.loads(done.stdout)["kernels"]


def test_the_cache_stays_within_its_bound_the_oldest_going_first(harness, tmp_path):
    """Twelve reports, each kept (another terminal width: another key), with a bound of 400 kB: the
    cache never holds more, and the newest entry is the one kept."""
    cache = tmp_path / "cache"
    env = environment(harness, PROFILECTL_CACHE_DIR=str(cache), PROFILECTL_CACHE_MAX_MB="0.4")
    sizes = []
    for width in range(100, 112):
        done = report(harness, dict(env, COLUMNS=str(width)), tmp_path)
        assert done.returncode == 0, done.stderr
        sizes.append(sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()))
    assert max(sizes) <= 400_000, sizes
    newest = report_key(dict(env, COLUMNS="111"), tmp_path, str(STRAGGLER))
    assert (cache / "reports" / f"{newest}.txt").is_file()
    assert len(list((cache / "reports").iterdir())) < 12


@pytest.mark.parametrize("value", ["lots", "nan", "-1", "inf"])
def test_a_bad_cache_bound_is_one_line_and_exit_2(harness, tmp_path, value):
    env = environment(harness, PROFILECTL_CACHE_DIR=str(tmp_path / "cache"), PROFILECTL_CACHE_MAX_MB=value)
    done = report(harness, env, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("profilectl")]
    assert len(lines) == 1 and "PROFILECTL_CACHE_MAX_MB" in lines[0], done.stderr
