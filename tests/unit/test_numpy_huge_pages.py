"""Reading turns off numpy's huge-page hint for the reading process only (formats/reader.py
numpy_without_huge_page_hints): a 10 M-dispatch report spent 0.9 s of CPU faulting its columns in
as huge pages. A value the user gave numpy's own switch is kept, and nothing is left in the
environment for a workload started later. Each case runs in a fresh interpreter (the hint is
process-wide state)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/rocprofv3-docs"

# reads the fixture as `report` does, then asks numpy for its hint state (the switch returns the old one)
PROBE = """
import json, os, sys
from pathlib import Path
from profilectl.formats.reader import read_path
from profilectl.formats.registry import READERS
tables = read_path(Path(sys.argv[1]), READERS)
import numpy as np
hint = bool(np._core.multiarray._set_madvise_hugepage(True))
print(json.dumps({"hint": hint, "kernels": len(tables.kernels), "env": os.environ.get("NUMPY_MADVISE_HUGEPAGE")}))
"""


def _probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if env_value is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = env_value
    env["PYTHONPATH"] = str(REPO / "src")
    out = subprocess.run([sys.executable, "-c", PROBE, str(FIXTURE)], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_reading_turns_the_hint_off_in_its_own_process_only():
    import numpy as np
    if not hasattr(np._core.multiarray, "_set_madvise_hugepage"):
        pytest.fail("this numpy has no huge-page switch: the reader's setting does nothing here")
    seen = _probe(None)
    assert seen["kernels"] > 0  # the fixture was really read
    assert seen["hint"] is False and seen["env"] is None


@pytest.mark.parametrize("value, hint", [("1", True), ("0", False)])
def test_the_users_own_setting_is_kept(value, hint):
    seen = _probe(value)
    assert seen["hint"] is hint and seen["env"] == value
