"""The Python API beside the user's own PyTorch, the one way the README gives: a virtual environment
that sees the system's packages (Debian 12 refuses `pip install --user`, PEP 668), with profilectl
installed into it from the checkout (`pip install -e`). One script imports torch and profilectl,
profiles a PyTorch workload through the API and reads its tables back as DataFrames."""

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from support import REPO

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = Path("/usr/bin/python3")


def system_torch() -> bool:
    return os.access(SYSTEM_PYTHON, os.X_OK) and subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import torch, venv"], capture_output=True).returncode == 0


WORKLOAD = """
import torch
from torch.profiler import record_function
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
for step in range(3):
    with record_function("forward"):
        loss = model(x).sum()
    loss.backward()
    optimizer.step()
"""

USER_SCRIPT = """
import json, sys
import torch, profilectl
result = profilectl.run("trace", ["--quiet", "--traces-dir", sys.argv[1], "--", sys.executable, sys.argv[2]],
                        stream_output=False)
run = result.open()
print(json.dumps({"torch": torch.__version__, "profilectl": profilectl.__file__, "status": result.status,
                  "operators": run.operators["name"].to_list(), "ranges": run.user_ranges["name"].to_list(),
                  "steps": run.profiler_steps["name"].to_list()}))
"""


@pytest.mark.skipif(not system_torch(), reason="needs a system Python with PyTorch and venv at /usr/bin/python3 "
                                               "(Debian: python3-torch, python3-venv; tools/install-host-deps --tests)")
def test_a_venv_that_sees_the_system_torch_runs_the_api(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", str(REPO)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    (tmp_path / "train.py").write_text(textwrap.dedent(WORKLOAD))
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFILECTL_", "PYTHON"))}
    env["PROFILECTL_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([str(python), str(tmp_path / "mine.py"), str(tmp_path / "traces"), str(tmp_path / "train.py")],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["torch"]  # the system's torch, seen from the venv
    assert Path(found["profilectl"]).resolve().is_relative_to((REPO / "src").resolve())  # the checkout's code
    assert found["status"] == "ok"
    assert "forward" in found["ranges"] and "forward" not in found["operators"]
    assert "aten::addmm" in found["operators"] and not any(n.startswith("ProfilerStep#") for n in found["operators"])
    assert found["steps"] and all(n.startswith("ProfilerStep#") for n in found["steps"])  # optimizer.step() ends a step
