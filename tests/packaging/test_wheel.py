"""The wheel as a user gets it: built from this tree, installed into a fresh virtual environment with
the declared polars floor, and run from an empty folder, far from the checkout.

Everything a measuring command needs (counter sets, presets, GPU facts, the built-in workload)
must come from inside the wheel; a missing file would show here as "unknown counter set" or
"built-in workload missing".
"""

import csv
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from support import FIXTURES, REPO
from fakes import FakeMachine

pytestmark = pytest.mark.slow


def declared_floor(package: str) -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(rf'"{package}>=([0-9.]+)"', text).group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, wheel path): the wheel and the declared polars floor in a fresh venv."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(REPO)],
                   check=True, capture_output=True, text=True)
    wheel = next((work / "dist").glob("profilectl-*.whl"))
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    bin_dir = work / "venv" / "bin"
    done = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           str(wheel), f"polars=={declared_floor('polars')}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return bin_dir, wheel


def run(bin_dir: Path, cwd: Path, *args: str, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILECTL_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PROFILECTL_CACHE_DIR=str(cwd / ".cache"))
    env.update(env_extra or {})
    return subprocess.run([str(bin_dir / "profilectl"), *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


def test_wheel_carries_the_data_the_types_marker_and_nothing_of_the_checkout(installed):
    import zipfile
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {n for n in names if n.startswith("profilectl/profiling/")}
    expected = {f"profilectl/profiling/{p.relative_to(REPO / 'profiling')}" for p in (REPO / "profiling").rglob("*")
                if p.is_file() and p.suffix in (".yaml", ".py", ".cpp")}
    assert data == expected
    assert "profilectl/py.typed" in names
    assert not any(n.startswith(("tests/", "bench/", "docker/")) for n in names)


def test_installed_profilectl_works_from_an_empty_folder(installed, tmp_path):
    bin_dir, _ = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(bin_dir, empty, "--version").stdout.startswith("profilectl ")

    report = json.loads(run(bin_dir, empty, "env-check", "--json").stdout)
    assert report["capabilities"]["timing"]["available"] and "counters" in report["services"]

    for service in ("profile", "trace"):
        done = run(bin_dir, empty, service, "--dry-run", "--json")
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        assert plan["workload_source"] == "default" and "site-packages" in plan["workload"][-1]

    # counters on a fake MI300X with ROCm 7.0: the counter set and the rocprofv3 facts come from the wheel
    (tmp_path / "fake").mkdir()
    machine = FakeMachine(tmp_path / "fake")
    machine.kfd_gpu(1, 90402)
    machine.rocm("7.0.2")
    machine.double("rocprofv3")
    done = run(bin_dir, empty, "counters", "--dry-run", "--json", "--set", "extended",
               env_extra={"PROFILECTL_PROBE_ROOT": str(machine.root), "PATH": f"{bin_dir}:{machine.path_with_bin()}"})
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["backend"] == "rocprofv3" and plan["counter_set"]["name"] == "extended"
    assert "TCC_HIT" in plan["counter_set"]["counters"] and len(plan["counter_set"]["passes"]) == 2
    gfx = json.loads(run(bin_dir, empty, "env-check", "--json",
                         env_extra={"PROFILECTL_PROBE_ROOT": str(machine.root)}).stdout)
    assert gfx["gpus"][0]["family"] == "CDNA3"  # architecture facts from the wheel's gpus.yaml

    traces = empty / "traces"
    done = run(bin_dir, empty, "profile", "--repeat", "2", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    run_dir = next(traces.iterdir())
    shown = run(bin_dir, empty, "report", str(run_dir), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["timing"]["runs"] == 2


def test_the_default_install_is_the_fast_one(installed):
    """polars and msgspec come with a plain install (the stdlib paths are 5x and 1.75x slower)."""
    bin_dir, _ = installed
    done = subprocess.run([str(bin_dir / "python"), "-c", "import polars, msgspec; print('ok')"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_report_of_a_large_trace_uses_polars_at_its_declared_floor(installed, tmp_path):
    """Above 8 MiB the CSV is read by polars in one pass (tables and timeline): at the floor version too."""
    bin_dir, _ = installed
    source = FIXTURES / "rocprofv3-docs/kernel_trace.csv"
    with open(source, newline="") as fh:
        rows = list(csv.reader(fh))
    big = tmp_path / "host" / "1_kernel_trace.csv"
    big.parent.mkdir()
    copies = 0
    with open(big, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(rows[0])
        while fh.tell() < 9 * 2**20:
            writer.writerows(rows[1:])
            copies += 1
    done = run(bin_dir, tmp_path, "report", str(big.parent), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["totals"]["dispatches"] == copies * (len(rows) - 1)
