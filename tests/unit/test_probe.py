"""The probe on fake machines: every scenario the users meet, read the way the real tools print."""

import dataclasses
import json
import subprocess
import sys

import pytest

from fakes import CAPS_DOCKER_DEFAULT
from support import REPO
from profilectl.probe.sources import capability_names, gfx_name

GFX942, GFX90A, GFX1151 = 90402, 90010, 110501


def mi300x(machine, rocm="7.0.2", aqlprofile="bare"):
    machine.kfd_cpu(0)
    for node in (1, 2):
        machine.kfd_gpu(node, GFX942)
    machine.rocm(rocm, aqlprofile=aqlprofile)
    machine.tool("rocprofv3", "rocprofiler-sdk version: 1.0.0 (ROCm 7.0.2)\n")
    machine.tool("rocprofv3-avail")


def test_gfx_names_from_kfd_target_versions():
    assert [gfx_name(v) for v in (GFX90A, GFX942, GFX1151, 110000, 90008)] == \
        ["gfx90a", "gfx942", "gfx1151", "gfx1100", "gfx908"]


def test_capability_bits_from_capeff():
    assert {"SYS_ADMIN", "PERFMON", "SYS_PTRACE"} <= set(capability_names("000001ffffffffff"))
    assert {"SYS_ADMIN", "PERFMON", "SYS_PTRACE"}.isdisjoint(capability_names(CAPS_DOCKER_DEFAULT))


def test_no_gpu_at_all(machine):
    env = machine.probe()
    assert env.facts.gpus == ()
    assert not env.assessment.capabilities["counters"].available
    assert "no GPU found" in env.assessment.capabilities["counters"].reason
    assert env.assessment.capabilities["timing"].available
    assert env.assessment.services["profile"].backend == "timing"
    assert env.assessment.services["trace"].backend == "timing"
    assert [f.backend for f in env.assessment.services["counters"].fallbacks] == ["rocprofv3", "rocprof-compute", "rocprof", "ncu"]


def test_mi300x_rocm7_counters_available(machine):
    mi300x(machine)
    env = machine.probe()
    assert [(g.arch, g.family, g.memory_bytes) for g in env.facts.gpus] == [("gfx942", "CDNA3", 192 * 2**30)] * 2
    assert env.facts.rocm.version == "7.0.2" and env.facts.rocm.root == "/opt/rocm"
    assert env.facts.tools["rocprofv3"].version == "1.0.0"
    assert env.assessment.capabilities["counters"].available and env.assessment.capabilities["counters"].backend == "rocprofv3"
    assert env.assessment.capabilities["tracing"].backend == "rocprofv3"
    assert env.assessment.capabilities["pc_sampling"].available
    assert env.assessment.services["counters"].backend == "rocprofv3"


def test_gfx1151_counters_unavailable_before_their_rocm_release(machine):
    machine.kfd_gpu(1, GFX1151, memory_bytes=96 * 2**30, perf_level="profile_standard")
    machine.rocm("6.4.1")
    machine.tool("rocprofv3")
    env = machine.probe()
    counters = env.assessment.capabilities["counters"]
    assert env.facts.gpus[0].arch == "gfx1151" and env.facts.gpus[0].family == "RDNA3.5 APU"
    assert not counters.available
    assert "gfx1151" in counters.reason and "ROCm 7.2.1" in counters.reason and "6.4.1" in counters.reason
    assert counters.cause == "rocm-too-old-for-arch"
    assert "ROCm 7.2.1 or later" in counters.fix and "profile" in counters.fix and "trace" in counters.fix
    # tracing still works on this GPU
    assert env.assessment.capabilities["tracing"].available and env.assessment.capabilities["tracing"].backend == "rocprofv3"


GFX1100 = 110000

# RDNA3 (gfx1100) and Strix Halo (gfx1151) across ROCm releases and performance levels: the verdict
# and the fix (profiling/gpus.yaml has the sources).
@pytest.mark.parametrize("gfx, rocm, level, available, cause", [
    (GFX1100, "6.4.1", "auto", True, "perf-level-auto"),
    (GFX1100, "6.4.1", "profile_standard", True, None),
    (GFX1100, "7.0.2", "high", True, "perf-level-not-stable"),
    (GFX1100, "7.2.1", "profile_standard", True, None),
    (GFX1151, "6.4.1", "auto", False, "rocm-too-old-for-arch"),
    (GFX1151, "7.0.2", "profile_standard", False, "rocm-too-old-for-arch"),
    (GFX1151, "7.2.0", "profile_standard", False, "rocm-too-old-for-arch"),  # still aborts: fix is in 7.2.1
    (GFX1151, "7.2.1", "auto", True, "perf-level-auto"),
    (GFX1151, "7.2.1", "profile_standard", True, None),
    (GFX1100, "7.0.2", "turbo_mode", True, "perf-level-unknown"),  # a level the driver never printed: judged, not dropped
    (GFX1100, "7.0.2", None, True, "perf-level-unknown"),  # sysfs file unreadable
])
def test_rdna_counters_by_release_and_perf_level(machine, gfx, rocm, level, available, cause):
    machine.kfd_gpu(1, gfx, perf_level=level)
    machine.rocm(rocm)
    machine.tool("rocprofv3")
    env = machine.probe()
    assert env.facts.gpus[0].perf_level == level
    counters = env.assessment.capabilities["counters"]
    assert (counters.available, counters.cause) == (available, cause), counters
    if cause and cause.startswith("perf-level"):
        assert "amd-smi set -g 0 -l stable_std" in counters.fix
    if available and cause is None:
        assert "profile_standard" in counters.reason


def test_perf_level_warning_reaches_the_counters_plan(machine):
    from profilectl.plan import make_plan
    from profilectl.request import Request
    machine.kfd_gpu(1, GFX1100, perf_level="auto")
    machine.rocm("7.0.2")
    machine.tool("rocprofv3")
    plan = make_plan(Request(service="counters", workload=(sys.executable, "-c", "pass")), machine.probe().facts,
                     machine.root / "run")
    assert any("read zero" in n and "stable_std" in n for n in plan.notes)


@pytest.mark.parametrize("hip, rocm, mismatch", [("6.2.41133-dd7f95766", "7.0.2", True),
                                                 ("7.0.51831-a3e329ad8", "7.0.2", False)])
def test_pytorch_bundling_another_rocm_runtime_is_said(machine, hip, rocm, mismatch):
    from profilectl.plan import make_plan
    from profilectl.request import Request
    machine.kfd_gpu(1, GFX942)
    machine.rocm(rocm)
    machine.tool("rocprofv3")
    machine.python_with_torch(version="2.5.1+rocm6.2", hip=hip)
    env = machine.probe()
    check = env.facts.checks["torch_runtime"]
    assert check.available is not mismatch
    if mismatch:
        assert check.cause == "two-rocm-runtimes" and "ROCm 6.2" in check.reason and "7.0.2" in check.reason
        assert "rocm7.0" in check.fix
        assert any("two runtimes" in n for n in env.facts.notes)
        plan = make_plan(Request(service="trace", workload=("python3", "train.py")), env.facts, machine.root / "run")
        assert any("two runtimes" in n for n in plan.notes)


def test_only_legacy_rocprof_on_rocm_61_is_chosen(machine):
    machine.kfd_gpu(1, GFX90A)
    machine.rocm("6.1.2")
    machine.tool("rocprof")
    env = machine.probe()
    assert env.assessment.services["counters"].backend == "rocprof"
    assert env.assessment.services["trace"].backend == "rocprof"
    assert env.assessment.services["counters"].fallbacks[0].backend == "rocprofv3"
    assert "rocprofv3 not found" in env.assessment.services["counters"].fallbacks[0].reason


def test_aqlprofile_only_versioned_gives_bare_name_cause_and_fix(machine):
    mi300x(machine, aqlprofile="versioned")
    env = machine.probe()
    counters = env.assessment.capabilities["counters"]
    assert not counters.available
    assert counters.cause == "aqlprofile-bare-name"
    assert "versioned" in counters.reason
    assert "ln -s libhsa-amd-aqlprofile64.so.1" in counters.fix
    assert env.assessment.capabilities["tracing"].available  # tracing needs no aqlprofile


def test_aqlprofile_outside_loader_path_suggests_ld_library_path(machine):
    mi300x(machine)
    (machine.root / "etc/ld.so.conf.d/10-rocm.conf").unlink()
    counters = machine.probe().assessment.capabilities["counters"]
    assert counters.cause == "aqlprofile-not-in-loader-path"
    assert counters.fix.startswith("export LD_LIBRARY_PATH=/opt/rocm/lib")
    machine.env["LD_LIBRARY_PATH"] = "/opt/rocm/lib"
    assert machine.probe().assessment.capabilities["counters"].available


def test_container_without_sys_admin_or_perfmon(machine):
    mi300x(machine)
    machine.container()
    machine.status(CAPS_DOCKER_DEFAULT, uid=0)
    env = machine.probe()
    assert env.facts.host.in_container and env.facts.host.container_evidence == "/.dockerenv"
    counters = env.assessment.capabilities["counters"]
    assert not counters.available and counters.cause == "missing-perfmon"
    assert "CAP_PERFMON" in counters.reason and "counters service" in counters.fix
    assert env.assessment.capabilities["tracing"].available


def test_nvidia_healthy_from_real_device_output(machine, device_fixtures):
    machine.nvidia((device_fixtures / "nvidia-smi-query.txt").read_text().strip())
    machine.write("/proc/driver/nvidia/params", (device_fixtures / "proc-driver-nvidia-params.txt").read_text())
    machine.write("/proc/self/status", (device_fixtures / "proc-self-status.txt").read_text())
    machine.tool("ncu", (device_fixtures / "ncu-version.txt").read_text())
    machine.python_with_torch("2.11.0+cu130", hip=None, cuda="13.0")
    env = machine.probe()
    gpu = env.facts.gpus[0]
    assert (gpu.vendor, gpu.arch, gpu.name, gpu.family) == ("nvidia", "sm_90", "NVIDIA H200", "Hopper")
    assert gpu.memory_bytes == 143771 * 2**20
    assert env.facts.tools["ncu"].version == "2025.3.1.0"
    assert env.facts.host.nvidia_profiling_admin_only is False
    assert env.facts.torch.backend == "cuda"
    assert env.assessment.services["counters"].backend == "ncu"
    assert env.assessment.services["trace"].backend == "torch" and env.assessment.capabilities["tracing"].available


def test_nvidia_admin_only_refuses_unprivileged_user(machine):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0", admin_only=1)
    machine.status(CAPS_DOCKER_DEFAULT, uid=1000)
    machine.tool("ncu", "Version 2025.3.1.0\n")
    counters = machine.probe().assessment.capabilities["counters"]
    assert not counters.available and counters.cause == "nvidia-counter-permission"
    assert "ERR_NVGPUCTRPERM" in counters.reason and "NVreg_RestrictProfilingToAdminUsers=0" in counters.fix


def test_nvidia_deep_probe_recognises_err_nvgpuctrperm(machine):
    machine.nvidia("0, NVIDIA H100 80GB HBM3, 81559, 9.0", admin_only=0)
    machine.python_with_torch("2.5.1+cu124", hip=None, cuda="12.4")
    machine.tool("ncu", "==PROF== Connected to process 42\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
                 "permission to access NVIDIA GPU Performance Counters on the target device 0.\n", exit_code=1)
    env = machine.probe(deep=True)
    live = env.facts.checks["live_counters"]
    assert not live.available and live.cause == "nvidia-counter-permission"
    assert not env.assessment.capabilities["counters"].available
    assert env.assessment.services["counters"].backend is None


def test_amd_deep_probe_recognises_aqlprofile_abort(machine, fixtures):
    mi300x(machine)
    script = machine.bin / "rocprofv3"
    script.write_text("#!/bin/sh\n/bin/echo 'aqlprofile API table load failed: HSA_STATUS_ERROR' >&2\n/bin/kill -ABRT $$\n")
    env = machine.probe(deep=True)
    assert env.facts.checks["amd_counters"].available  # the static checks saw nothing wrong ...
    live = env.facts.checks["live_counters"]  # ... the live probe did
    assert not live.available and live.cause == "aqlprofile-load-failed"
    assert env.assessment.capabilities["counters"].cause == "aqlprofile-load-failed"


def test_amd_deep_probe_success_lists_counters(machine, fixtures):
    mi300x(machine)
    machine.tool("rocprofv3", (fixtures / "rocprofv3-docs" / "list-avail.txt").read_text())
    env = machine.probe(deep=True)
    assert env.facts.checks["live_counters"].available
    assert env.assessment.capabilities["counters"].available


def test_rocminfo_when_no_kfd_sysfs(machine):
    machine.tool("rocminfo", """*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx90a
  Marketing Name:          AMD Instinct MI250X
  Device Type:             GPU
""")
    env = machine.probe()
    assert [(g.arch, g.name, g.source) for g in env.facts.gpus] == [("gfx90a", "AMD Instinct MI250X", "rocminfo")]


def test_rocm_smi_counts_gpus_when_nothing_else(machine, fixtures):
    machine.tool("rocm-smi", (fixtures / "rocprofv3-docs" / "rocm-smi.txt").read_text())
    env = machine.probe()
    assert len(env.facts.gpus) == 4 and all(g.vendor == "amd" and g.source == "rocm-smi" for g in env.facts.gpus)


def test_hanging_tool_does_not_hang_the_probe(machine):
    machine.kfd_gpu(1, GFX942)
    hang = machine.bin / "ncu"
    hang.write_text("#!/bin/sh\n/bin/sleep 30\n")
    hang.chmod(0o755)
    env = machine.probe()
    assert env.facts.probe_seconds < 10
    assert env.facts.tools["ncu"].version is None


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "tools/profilectl", *args], capture_output=True, text=True, env=env)


def test_env_check_json_has_stable_keys(machine):
    mi300x(machine)
    done = _cli("env-check", "--json", "--root", str(machine.root), "--path", str(machine.bin))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) >= {"schema_version", "host", "gpus", "rocm", "tools", "torch", "capabilities", "services"}
    assert set(report["capabilities"]) == {"tracing", "counters", "pc_sampling", "timing", "attach", "program_tracing"}
    assert set(report["capabilities"]["counters"]) >= {"available", "reason", "fix", "backend"}


@pytest.mark.parametrize("args", [["env-check", "--bogus"], ["env-check", "--require", "magic"],
                                  ["env-check", "--root", "/does/not/exist"], ["frobnicate"]])
def test_bad_input_is_one_line_exit_2(args):
    done = _cli(*args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_require_exits_3_when_unavailable_and_0_when_available(machine):
    base = ["env-check", "--root", str(machine.root), "--path", str(machine.bin)]
    done = _cli(*base, "--require", "counters")
    assert done.returncode == 3 and "counters unavailable" in done.stderr
    assert _cli(*base, "--require", "timing").returncode == 0


def test_amd_gpu_in_sysfs_but_container_without_device_grant(machine):
    machine.kfd_gpu(1, GFX942, device_nodes=False)
    machine.rocm("7.0.0")
    machine.tool("rocprofv3")
    machine.container()
    env = machine.probe()
    assert env.facts.gpus[0].arch == "gfx942"
    tracing = env.assessment.capabilities["tracing"]
    assert not tracing.available
    refusal = env.assessment.services["trace"].fallbacks[0]
    assert refusal.cause == "no-kfd-device" and "compose.amd.yml" in refusal.fix
    assert env.assessment.services["trace"].backend == "timing"


def test_device_nodes_without_permission(machine):
    from profilectl.probe.counters import amd_device_access
    mi300x(machine)
    env = machine.probe()
    assert env.facts.checks["amd_devices"].available
    host = env.facts.host
    kfd = dataclasses.replace(host.devices.kfd, accessible=False)
    # as seen by a user outside the video/render groups
    host = dataclasses.replace(host, uid=1000, devices=dataclasses.replace(host.devices, kfd=kfd))
    verdict = amd_device_access(dataclasses.replace(env.facts, host=host))
    assert not verdict.available and verdict.cause == "no-device-permission"
    assert "uid 1000" in verdict.reason and "render" in verdict.fix


def test_launcher_names_a_missing_dependency_in_one_line(tmp_path):
    """A checkout without .venv, run by an interpreter without the dependencies (-S: no site)."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/profilectl").write_text((REPO / "tools/profilectl").read_text())
    (tmp_path / "src").symlink_to(REPO / "src")
    done = subprocess.run([sys.executable, "-S", str(tmp_path / "tools/profilectl"), "env-check"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "missing Python package(s)" in done.stderr and "tools/install-host-deps" in done.stderr


@pytest.mark.skipif(not (REPO / ".venv/bin/python").exists(),
                    reason="no .venv in this checkout (tools/install-host-deps makes it)")
def test_launcher_uses_the_checkouts_venv_when_this_interpreter_lacks_the_dependencies():
    done = subprocess.run([sys.executable, "-S", str(REPO / "tools/profilectl"), "--version"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("profilectl "), done.stderr


@pytest.mark.parametrize("rocm, available", [("6.3.2", False), ("6.4.1", True)])
def test_pc_sampling_follows_the_rocprofv3_option_table(machine, rocm, available):
    mi300x(machine, rocm=rocm)
    verdict = machine.probe().assessment.capabilities["pc_sampling"]
    assert verdict.available is available
    if not available:
        assert "ROCm 6.4 or later" in verdict.fix
