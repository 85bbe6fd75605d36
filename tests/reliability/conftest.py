"""Fixtures of the reliability scenarios: a harness that runs profilectl with a tag and checks, after
each scenario, that no tagged process is left and no run is lost; small tmpfs file systems.
Helpers live in reliability_support.py."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attacker import new_user  # noqa: E402
from reliability_support import Harness, settle_and_check  # noqa: E402


@pytest.fixture
def harness(request, tmp_path):
    tag = uuid.uuid4().hex
    harness = Harness(tmp_path, tag)
    try:
        yield harness
        settle_and_check(request, harness)
    finally:
        for point in harness.mounts:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.fixture
def small_fs(harness, tmp_path):
    """A file system of a given size (tmpfs): small_fs(size_kib) -> its mount point. The harness
    unmounts it once it has checked the runs on it."""
    def mount(size_kib: int) -> Path:
        point = tmp_path / f"fs{len(harness.mounts)}"
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(point)], check=True)
        harness.mounts.append(point)
        return point
    return mount




@pytest.fixture(scope="module")
def user():
    """A real, unprivileged account for this module: (uid, gid), deleted afterwards; root only
    (useradd), so a normal user's run skips what needs it."""
    if os.geteuid() != 0:
        pytest.skip("needs root (useradd, and root acting for another user)")
    with new_user() as made:
        yield made


@pytest.fixture
def base():
    """A folder the user can reach (pytest's own tmp_path is under a root-only 0700 folder, where every
    move of the attacker would fail with EACCES and prove nothing)."""
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="profilectl-privileges-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
