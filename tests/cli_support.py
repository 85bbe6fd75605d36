"""Running profilectl's CLI against a fake machine (tests/fakes.py) with the profiler doubles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support import REPO

WORKLOAD = [sys.executable, str(REPO / "profiling/workloads/matmul.py"), "--size", "64", "--iters", "1"]


def counter_names(*sets: str, arch: str = "gfx942") -> list[str]:
    """The counters of these shipped sets on an architecture: what the doubles list as available."""
    from profilectl import countersets
    return list(dict.fromkeys(c for s in sets for c in countersets.load(s, "amd", arch).counters))


def rocm_release(machine) -> str | None:
    """X.Y.Z of the fake machine's /opt/rocm/.info/version: the release the doubles emulate (7.2.4
    ships another rocprofiler-sdk than 7.2.1)."""
    version = machine.root / "opt/rocm/.info/version"
    return ".".join(version.read_text().strip().split("-")[0].split(".")[:3]) if version.exists() else None


def cli(machine, *args, extra_env=None, timeout=120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PROFILECTL_PROBE_ROOT=str(machine.root), PATH=machine.path_with_bin(),
               FAKE_COUNTERS=str(getattr(machine, "counters_file", "")))
    if rocm_release(machine):
        env["FAKE_ROCM_RELEASE"] = rocm_release(machine)
    env.update(extra_env or {})
    traces = machine.root.parent / "traces"
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args[:1], "--traces-dir", str(traces),
                           *args[1:]], capture_output=True, text=True, env=env, timeout=timeout)


def json_run(machine, *args, **kw) -> tuple[dict, Path]:
    done = cli(machine, args[0], "--json", *args[1:], **kw)
    assert "Traceback" not in done.stderr, done.stderr
    result = json.loads(done.stdout)
    assert result["exit_code"] == done.returncode
    return result, Path(result["run_dir"])


def amd_machine(machine, tmp_path, gfx: int = 90402, rocm: str = "7.0.2", sets=("basic", "extended"), **gpu):
    """An AMD GPU (default MI300X, gfx942) with ROCm and the rocprofv3 double listing `sets`."""
    machine.kfd_gpu(1, gfx, **gpu)
    machine.rocm(rocm)
    machine.double("rocprofv3")
    machine.counters_file = tmp_path / "counters.txt"
    machine.counters_file.write_text("\n".join(counter_names(*sets)) + "\n")
    return machine


def cli_plain(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """profilectl on this machine as it is (no fake root), as a user types it."""
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), *args], capture_output=True, text=True,
                          timeout=timeout)
