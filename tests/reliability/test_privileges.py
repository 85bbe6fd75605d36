"""Least privilege under attack: root running profilectl for another user, and that user trying to
turn it into a privilege escalation. A real user (made with useradd for the session), real
processes of that user racing symbolic-link swaps against the hand-back in a loop, real files of
root that must come out of it untouched."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profilectl import runs
from reliability_support import as_user, stop, user_can_run, user_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root running for another user needs root (and useradd)")

ROOT_FILES = 60


def attack_landed(folder: Path) -> bool:
    return (folder / "attack-landed").exists()


def root_zone(base: Path) -> Path:
    """Root-only files (0600 in 0700 folders) the user must never get."""
    zone = base / "root-zone"
    for index in range(ROOT_FILES):
        folder = zone / f"d{index % 6}"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"f{index // 6}"  # the same names as the run's files: a path that crossed a link lands here
        (folder / name).write_text("root only\n")
        (folder / name).chmod(0o600)
    zone.chmod(0o711)  # the user may pass through (so a link to it resolves), never read
    return zone


def snapshot(top: Path) -> dict[str, tuple[int, int, int]]:
    """path -> (uid, gid, mode) of everything under `top` (links not followed)."""
    found = {}
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files, None]:
            path = os.path.join(folder, name) if name else folder
            st = os.lstat(path)
            found[path] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
    return found


def swap_loop(run_dir: Path, target: Path, names: list[str]):
    """The attacker: replace each sub-folder with a link to `target` and back, as fast as it can."""
    def loop():
        while True:
            for name in names:
                real, aside = run_dir / name, run_dir / f"{name}.aside"
                try:
                    os.rename(real, aside)
                    os.symlink(target, real)
                    time.sleep(0.002)  # long enough for a walk by path to enter the link
                    os.unlink(real)
                    os.rename(aside, real)
                    if not attack_landed(run_dir.parent):
                        (run_dir.parent / "attack-landed").touch()
                except OSError:
                    pass
    return loop


def reroot(run_dir: Path, names: list[str]) -> None:
    """The run's files root's again for the next round, by descriptors (a path could cross the
    attacker's link and take back what a faulty hand-back gave away: the evidence)."""
    top = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in names:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
            except OSError:
                continue
            try:
                for entry in os.scandir(sub):
                    os.chown(entry.name, 0, 0, dir_fd=sub, follow_symlinks=False)
            except OSError:
                pass
            finally:
                os.close(sub)
    finally:
        os.close(top)


def test_the_hand_back_never_follows_a_swapped_link_out_of_the_run(user, base):
    """The issue's attack, raced for real: a run directory that the user owns (as the older design
    made it), root's files in its sub-folders, and the user swapping those sub-folders for links to a
    root-only folder while root hands the run back, 200 times (runs.hand_over; the container
    entrypoint hands nothing back any more: docs/threat-model.md)."""
    tmp_path = base
    zone = root_zone(tmp_path)
    before = snapshot(zone)
    traces = tmp_path / "traces"
    traces.mkdir()
    os.chown(traces, *user)
    run_dir = traces / "run"
    names = [f"sub{i}" for i in range(6)]
    for name in names:
        (run_dir / name).mkdir(parents=True)
        for index in range(10):
            (run_dir / name / f"f{index}").write_text("of the run\n")
    os.chown(run_dir, *user)
    for name in names:
        os.chown(run_dir / name, *user)
    def hand_back(owner: tuple[int, int]) -> None:
        runs.hand_over(run_dir, owner)
    attacker = as_user(user, swap_loop(run_dir, zone / "d0", names))
    try:
        for _ in range(200):
            try:
                hand_back(user)
            except OSError:  # a walk by path may trip over the swaps: the next round goes on
                pass
            reroot(run_dir, names)
    finally:
        stop(attacker)
    assert attack_landed(traces)  # the attacker really swapped folders while root handed back
    after = snapshot(zone)
    given = sorted(path for path, (uid, _, _) in after.items() if uid == user[0])
    changed = sorted(path for path in before if before[path] != after.get(path))
    assert given == [] and changed == [], f"{len(given)} root files given to the user: {given[:5]}"
    runs.hand_over(run_dir, user)
    owners = {os.lstat(p).st_uid for p in [run_dir, *run_dir.rglob("*")]}
    assert owners == {user[0]}  # the run itself is the user's


def test_the_hand_back_refuses_links_devices_fifos_and_other_links_to_files(user, tmp_path):
    from profilectl import ownership
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("root's\n")
    (run_dir / "mine.txt").write_text("the run's\n")
    os.link(outside, run_dir / "hardlink.txt")  # a second name of a file outside the run
    os.symlink(outside, run_dir / "link.txt")
    os.mkfifo(run_dir / "fifo")
    fd = ownership.open_dir(run_dir)
    try:
        done = ownership.hand_back(fd, user)
    finally:
        os.close(fd)
    assert os.lstat(run_dir / "mine.txt").st_uid == user[0]
    assert os.stat(outside).st_uid == 0 and os.lstat(run_dir / "fifo").st_uid == 0
    assert os.lstat(run_dir / "link.txt").st_uid == 0
    assert any("hardlink.txt: has 2 links" in line for line in done.refused), done.refused


@pytest.mark.parametrize("keep", [(), ("PERFMON",), ("SYS_ADMIN",)])
def test_become_keeps_exactly_the_capabilities_asked_for_across_exec(user, tmp_path, keep):
    """The process that runs the profiler is the user, with exactly the capabilities the plan kept as
    ambient ones (none by default) and no core dumps where it keeps any: its files are the user's
    from the start."""
    from profilectl import ownership
    folder = tmp_path / "out"
    folder.mkdir()
    os.chown(folder, *user)
    numbers = tuple(ownership.CAP_NUMBERS[name] for name in keep)
    code = ("import os, sys\nfrom profilectl import ownership\n"
            f"b = ownership.become({user!r}, {numbers!r})\n"
            "os.execv('/bin/sh', ['sh', '-c', 'id -u; grep -E \"^Cap(Eff|Amb)\" /proc/self/status; ulimit -c; "
            "echo x > f'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(ownership.__file__).parents[1])))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[0] == str(user[0])
    caps = dict(zip(lines[1:5:2], lines[2:5:2]))
    wanted = sum(1 << c for c in numbers if c in ownership.effective_caps())
    assert int(caps["CapAmb:"], 16) == wanted and int(caps["CapEff:"], 16) == wanted, caps
    if keep:
        assert lines[5] == "0"  # no core file of a process that holds a capability
    assert os.stat(folder / "f").st_uid == user[0]


def test_root_run_for_the_user_changes_nothing_outside_the_run(user, base, harness):
    """The privilege test: root runs profilectl into the user's traces folder; a process of the user
    attacks every run directory that appears (plants links named like the run's files and folders,
    swaps raw/ for a link to a root-only folder). Afterwards no file outside the run has a new owner
    or mode, and no new file. profilectl runs as the user (every file theirs from the start) or, where
    it cannot (its Python out of the user's reach), refuses in one line. (--as-root, the explicit
    choice, stays root and writes through the run folder's descriptor: test_least_privilege.py.)"""
    from profilectl import ownership
    tmp_path = base
    zone = root_zone(tmp_path)
    before = snapshot(zone)
    traces = harness.traces(tmp_path / "traces")
    traces.mkdir()
    os.chown(traces, *user)
    target = zone / "d1"

    def attack():
        while True:
            for run in list(traces.iterdir()) if traces.is_dir() else []:
                if not run.is_dir() or run.is_symlink() or run.name.endswith(".aside"):
                    continue
                try:  # the run folder itself swapped for a link to root's folder, and back
                    os.rename(run, run.with_name(run.name + ".aside"))
                    os.symlink(target, run)
                    time.sleep(0.002)
                    os.unlink(run)
                    os.rename(run.with_name(run.name + ".aside"), run)
                    (traces / "attack-landed").touch()
                except OSError:
                    pass
                for name in ("raw", "stdout.log", "summary.json", "kernels.csv", "timing.csv", "sub"):
                    try:
                        os.symlink(target / "f1", run / name) if "." in name else os.symlink(target, run / name)
                    except OSError:
                        pass
                try:
                    os.rename(run / "raw", run / "raw.aside")
                    os.symlink(target, run / "raw")
                    (traces / "attack-landed").touch()
                except OSError:
                    pass
            time.sleep(0.001)
    python, packages = user_python()  # an interpreter the user can start: profilectl goes on as the user
    harness.env["PYTHONPATH"] = packages
    work = tmp_path / "work"  # the user's own working folder
    work.mkdir()
    os.chown(work, *user)
    can_become = user_can_run(user, python, packages, (traces, work))
    attacker = as_user(user, attack)
    try:
        done = harness.run_with(python, "profile", "--json", "--no-sample", "--repeat", "3", "--warmup", "0",
                                "--traces-dir", str(traces), "--", "sh", "-c",
                                "for i in 1 2 3 4 5; do echo x > out$i; done", cwd=work)
    finally:
        stop(attacker)
        for aside in traces.glob("*.aside"):  # killed mid-swap: the run back under its name
            link = aside.with_name(aside.name[:-len(".aside")])
            if link.is_symlink():
                link.unlink()
            os.rename(aside, link)
    after = snapshot(zone)
    changed = sorted(path for path in before if before[path] != after.get(path))
    assert changed == [], changed[:5]
    if not can_become:
        assert done.returncode == 2 and "refusing to run uid" in done.stderr, done.stderr
        assert list(traces.iterdir()) == []
        return
    assert attack_landed(traces)
    assert sorted(set(after) - set(before)) == []  # as the user, root's folder cannot even receive a file
    made = [p for p in traces.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(made) == 1, (done.returncode, done.stderr[-2000:], sorted(traces.iterdir()), sorted(set(after) - set(before)))
    run = made[0]
    owners = {os.lstat(p).st_uid for p in [run, *run.rglob("*")]}
    assert owners == {user[0]}, owners  # nothing of root's: profilectl was the user before the folder existed
    if done.returncode != 0:  # the user tore their own run apart (renamed it mid-write): their doing, one line
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        harness.planted.add(run)
        return
    manifest = json.loads((run / "manifest.json").read_text())
    assert any(f"uid {user[0]}" in note for note in manifest["notes"]), manifest["notes"]
