"""Fake machines for the probe: a root file system (sysfs, proc, /opt/rocm) and a bin directory of
executables that print what the real tools print."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

DOUBLES = Path(__file__).resolve().parent / "doubles"

# CapEff of a root shell in a default Docker container (no SYS_ADMIN, no PERFMON, SYS_PTRACE absent)
CAPS_DOCKER_DEFAULT = "00000000a80425fb"
CAPS_ALL = "000001ffffffffff"


class FakeMachine:
    def __init__(self, tmp: Path):
        self.root = tmp / "root"
        self.bin = tmp / "bin"
        self.root.mkdir()
        self.bin.mkdir()
        self.env: dict[str, str] = {}
        self.status(CAPS_ALL, uid=0)
        self.write("/proc/sys/kernel/perf_event_paranoid", "2\n")
        self.write("/proc/sys/kernel/hostname", "fakehost\n")

    # ------------------------------------------------------------ files
    def write(self, absolute: str, text: str) -> Path:
        path = self.root / absolute.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def status(self, cap_eff: str, uid: int = 0) -> None:
        self.write("/proc/self/status", f"Name:\tpython3\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
                                        f"Groups:\t44 109\nCapEff:\t{cap_eff}\n")

    def container(self) -> None:
        self.write("/.dockerenv", "")

    # ------------------------------------------------------------ tools
    def tool(self, name: str, stdout: str = "", exit_code: int = 0, stderr: str = "") -> Path:
        """An executable that prints fixed text (what the real tool prints)."""
        data = self.bin / f".{name}.out"
        data.write_text(stdout)
        err = self.bin / f".{name}.err"
        err.write_text(stderr)
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n/bin/cat {shlex.quote(str(data))}\n/bin/cat {shlex.quote(str(err))} >&2\nexit {exit_code}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    def double(self, name: str, source: str | None = None) -> Path:
        """A test double from tests/doubles that behaves like the real command line."""
        path = self.bin / name
        text = (DOUBLES / (source or name)).read_text().replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1)
        text = text.replace("@TESTS_DIR@", str(DOUBLES.parent))  # where a double finds tests/rocpd_writer.py
        path.write_text(text)
        path.chmod(0o755)
        return path

    def python_with_torch(self, version: str = "2.5.1+rocm6.2", hip: str | None = "6.2", cuda: str | None = None) -> None:
        import json
        info = {"python": "/usr/bin/python3", "path": "/usr/lib/python3/site-packages/torch",
                "version": version, "cuda": cuda, "hip": hip}
        self.tool("python3", json.dumps(info) + "\n")

    # ------------------------------------------------------------ GPUs
    def kfd_gpu(self, node: int, gfx_target_version: int, memory_bytes: int = 192 * 2**30,
                device_nodes: bool = True, perf_level: str | None = None) -> None:
        """A GPU node of the KFD topology; its render node renderD<127+node>, whose amdgpu device
        shows `perf_level` (power_dpm_force_performance_level) when given."""
        minor = 127 + node
        if device_nodes:  # what the amdgpu driver creates (and a container gets with the AMD grant)
            self.write("/dev/kfd", "")
            self.write(f"/dev/dri/renderD{minor}", "")
        base = f"/sys/class/kfd/kfd/topology/nodes/{node}"
        self.write(f"{base}/properties", f"cpu_cores_count 0\nsimd_count 1216\ngfx_target_version {gfx_target_version}\n"
                                         f"drm_render_minor {minor}\n")
        if perf_level is not None:
            self.write(f"/sys/class/drm/renderD{minor}/device/power_dpm_force_performance_level", perf_level + "\n")
        self.write(f"{base}/mem_banks/0/properties", f"heap_type 1\nsize_in_bytes {memory_bytes}\n")

    def kfd_cpu(self, node: int = 0) -> None:
        self.write(f"/sys/class/kfd/kfd/topology/nodes/{node}/properties",
                   "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\n")

    def rocm(self, version: str, aqlprofile: str | None = "bare", root: str = "/opt/rocm") -> None:
        self.write(f"{root}/.info/version", version + "\n")
        lib = f"{root}/lib"
        (self.root / lib.lstrip("/")).mkdir(parents=True, exist_ok=True)
        if aqlprofile in ("bare", "versioned"):
            self.write(f"{lib}/libhsa-amd-aqlprofile64.so.1", "")
        if aqlprofile == "bare":
            self.write(f"{lib}/libhsa-amd-aqlprofile64.so", "")
        self.write("/etc/ld.so.conf.d/10-rocm.conf", f"{lib}\n")

    def nvidia(self, query_line: str, admin_only: int = 0) -> None:
        self.tool("nvidia-smi", query_line + "\n")
        self.write("/proc/driver/nvidia/params", f"ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: {admin_only}\n")
        self.write("/dev/nvidia0", "")
        self.write("/dev/nvidiactl", "")

    # ------------------------------------------------------------ probing
    def probe(self, deep: bool = False):
        """The EnvReport of this machine: its Facts and what each service would pick."""
        from profilectl.envreport import EnvReport
        from profilectl.plan import assess
        from profilectl.probe import probe
        facts = probe(self.root, path=str(self.bin), deep=deep, env=dict(self.env))
        return EnvReport(facts, assess(facts))

    def path_with_bin(self) -> str:
        return f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"


def copy_fixture(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
