"""A real, unprivileged user for the scenarios where root works in that user's folders (or reads what
the user shares), and what that user does to attack it: forked processes that become the user (no new
Python is started: root's Python is out of the user's reach on this machine), files planted as theirs.
Imported by the scenario modules (pytest fixtures stay in each module)."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT_ONLY = "root only\n"


@contextlib.contextmanager
def new_user() -> Iterator[tuple[int, int]]:
    """A real account made with useradd for the scenario: (uid, gid); deleted afterwards."""
    name = f"pctl-{secrets.token_hex(4)}"
    subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@contextlib.contextmanager
def reachable_folder(prefix: str = "profilectl-attack-") -> Iterator[Path]:
    """A folder the user can reach (pytest's own tmp_path is under a root-only 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def users_folder(parent: Path, name: str, user: tuple[int, int]) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    os.chown(folder, *user)
    return folder


def root_secret(parent: Path) -> Path:
    """A root-only file (0600 in a 0711 folder: a link to it resolves, it cannot be read by the user)."""
    zone = parent / "root-zone"
    zone.mkdir(mode=0o711)
    zone.chmod(0o711)
    secret = zone / "secret"
    secret.write_text(ROOT_ONLY)
    secret.chmod(0o600)
    return secret


def untouched(secret: Path) -> bool:
    st = os.lstat(secret)
    return st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600 and secret.read_text() == ROOT_ONLY


def as_user(user: tuple[int, int], work: Callable[[], None], wait: bool = True) -> int:
    """Fork a process that becomes the user and runs `work()`: its pid (waited for when `wait`)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
            work()
            code = 0
        finally:
            os._exit(code)
    if wait:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return pid


def stop(pid: int) -> None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)


def next_pids(count: int) -> list[int]:
    """The process ids the kernel hands out next (a PID in a file name is predictable)."""
    try:
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except OSError:
        last = os.getpid()
    top = int(Path("/proc/sys/kernel/pid_max").read_text())
    return [(last + i) % top for i in range(1, count + 1)]


def plant_links(folder: Path, names: list[str], target: Path) -> Callable[[], None]:
    """The user's work: a link to `target` at each name (a name already taken is left)."""
    def work() -> None:
        for name in names:
            try:
                os.symlink(target, folder / name)
            except OSError:
                pass
    return work


def keep_planting(folder: Path, names: list[str], target: Path) -> Callable[[], None]:
    """The user's work, for ever: a link to `target` at each of `names` again as soon as it is free."""
    def work() -> None:
        while True:
            for name in names:
                try:
                    os.symlink(target, folder / name)
                except OSError:
                    pass
            time.sleep(0)
    return work
