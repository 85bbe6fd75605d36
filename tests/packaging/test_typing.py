"""The stages are typed values: mypy (configured in pyproject.toml, untyped defs refused) passes on src/."""

import subprocess
import sys

from support import REPO


def test_mypy_is_clean_on_src():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
