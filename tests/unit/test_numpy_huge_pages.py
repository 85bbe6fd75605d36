"""Reading turns numpy's huge-page hint off while it reads, and puts it back after
(formats/reader.py numpy_without_huge_page_hints): a 10 M-dispatch report spent 0.9 s of CPU faulting
its columns in as huge pages, and a notebook that reads a trace keeps its own setting afterwards. A
value the user gave numpy's own switch is kept throughout, and nothing is left in the environment
for a program started meanwhile. Each case runs in a fresh interpreter (the hint is process-wide)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/rocprofv3-docs"

# reads the fixture as `report` and the Python API do, noting the hint while the readers' tables are
# merged (inside the reading) and after it (numpy's switch returns the state it replaces)
PROBE = """
import json, os, sys
from pathlib import Path
import numpy as np
from profilectl.formats import reader
from profilectl.formats.registry import READERS

def hint():
    switch = np._core.multiarray._set_madvise_hugepage
    state = switch(True)
    switch(state)
    return bool(state)

seen = {}
merge_all = reader.merge_all
def noting(*args):
    seen["during"] = hint()
    seen["env_during"] = os.environ.get("NUMPY_MADVISE_HUGEPAGE")
    return merge_all(*args)
reader.merge_all = noting
tables = reader.read_path(Path(sys.argv[1]), READERS)
seen.update(after=hint(), kernels=len(tables.kernels), env_after=os.environ.get("NUMPY_MADVISE_HUGEPAGE"))
print(json.dumps(seen))
"""


def _probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if env_value is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = env_value
    env["PYTHONPATH"] = str(REPO / "src")
    out = subprocess.run([sys.executable, "-c", PROBE, str(FIXTURE)], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_hint_is_off_while_reading_and_back_after():
    seen = _probe(None)
    assert seen["kernels"] > 0  # the fixture was really read
    assert seen["during"] is False and seen["after"] is True  # numpy's own default on Linux, put back
    assert seen["env_during"] is None and seen["env_after"] is None


@pytest.mark.parametrize("value, hint", [("1", True), ("0", False)])
def test_the_users_own_setting_is_kept(value, hint):
    seen = _probe(value)
    assert seen["during"] is hint and seen["after"] is hint and seen["env_during"] == value
