"""Can hardware counters really be read here? The static half of the aqlprofile probe.

"aqlprofile API table load failed" has several real causes, each with its own fix:
- the GPU's counters are not defined in this ROCm release (gfx1151 before 7.2: profiling/gpus.yaml);
- libhsa-amd-aqlprofile64.so exists only under its versioned name (.so.1), while the HSA runtime
  dlopens the bare name;
- the library exists but its directory is not in the loader path;
- counter collection in a container without CAP_PERFMON / CAP_SYS_ADMIN.
The live half (`--deep`) runs the real profiler: see probe/live.py.
"""

from __future__ import annotations

import os
from typing import Any

from profilectl import data
from profilectl.facts import Facts, Gpu, Verdict
from profilectl.probe.machine import Machine
from profilectl.probe.sources import PERF_LEVELS, version_tuple

AQLPROFILE = "libhsa-amd-aqlprofile64.so"
_STANDARD_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu",
                      "/lib/x86_64-linux-gnu")


def _loader_dirs(machine: Machine) -> list[str]:
    dirs = [d for d in machine.env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for conf in machine.glob("/etc/ld.so.conf.d/*.conf"):
        for line in conf.read_text(errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                dirs.append(line)
    return dirs + list(_STANDARD_LIB_DIRS)


def aqlprofile_library(machine: Machine, rocm_root: str | None) -> Verdict:
    """Where the aqlprofile library is, and whether the HSA runtime will find it by its bare name."""
    search = _loader_dirs(machine) + ([f"{rocm_root}/lib", f"{rocm_root}/lib64"] if rocm_root else [])
    loader = set(_loader_dirs(machine))
    bare = versioned = None
    for directory in dict.fromkeys(search):
        if bare is None and machine.exists(f"{directory}/{AQLPROFILE}"):
            bare = directory
        if versioned is None and machine.glob(f"{directory}/{AQLPROFILE}.*"):
            versioned = directory
    if bare and bare in loader:
        return Verdict(True, f"{AQLPROFILE} found in {bare}")
    if bare:
        return Verdict(False, f"{AQLPROFILE} is in {bare}, which is not in the loader path",
                       f"export LD_LIBRARY_PATH={bare}:$LD_LIBRARY_PATH", cause="aqlprofile-not-in-loader-path")
    if versioned:
        return Verdict(False, f"{AQLPROFILE} exists only under its versioned name in {versioned}; the HSA "
                       "runtime loads the bare name and fails with 'aqlprofile API table load failed'",
                       f"ln -s {AQLPROFILE}.1 {versioned}/{AQLPROFILE} (or install the hsa-amd-aqlprofile "
                       "development package)", cause="aqlprofile-bare-name")
    return Verdict(False, f"{AQLPROFILE} not found (searched {', '.join(dict.fromkeys(search))})",
                   "install the hsa-amd-aqlprofile package of your ROCm release", cause="aqlprofile-missing")


def privileges(facts: Facts) -> Verdict:
    caps = set(facts.host.effective_capabilities)
    if "PERFMON" in caps or "SYS_ADMIN" in caps:
        return Verdict(True, "holds " + " and ".join(sorted(caps & {"PERFMON", "SYS_ADMIN"})))
    if facts.host.in_container:
        return Verdict(False, "in a container without CAP_PERFMON or CAP_SYS_ADMIN: the GPU cannot be "
                       "locked for counter collection",
                       "use the counters service (it runs as root with cap_add SYS_ADMIN)",
                       cause="missing-perfmon")
    return Verdict(True, "not in a container; device access is decided by the render/video groups")


def amd_device_access(facts: Facts) -> Verdict:
    """Can this process open the GPU at all? sysfs shows the GPUs even in a container that was not
    granted them, so the device nodes decide."""
    kfd = facts.host.devices.kfd
    render = facts.host.devices.render
    if not kfd.exists:
        where = ("this container was not granted the GPU devices" if facts.host.in_container
                 else "the amdgpu kernel driver is not loaded")
        fix = ("add docker/compose.amd.yml (devices /dev/kfd, /dev/dri)" if facts.host.in_container
               else "load the amdgpu driver (modprobe amdgpu) or install the ROCm kernel driver")
        return Verdict(False, f"an AMD GPU is listed in sysfs but /dev/kfd does not exist: {where}", fix,
                       cause="no-kfd-device")
    if not kfd.accessible or (render and not any(r.accessible for r in render)):
        gids = sorted({str(n.gid) for n in [kfd, *render] if n.gid is not None})
        return Verdict(False, f"/dev/kfd or /dev/dri/renderD* is not readable and writable by uid {facts.host.uid}",
                       f"add the user to the groups owning them (gid {', '.join(gids)}; usually video and render), "
                       "or in a container use group_add with those numeric GIDs", cause="no-device-permission")
    return Verdict(True, "/dev/kfd and the render nodes are accessible")


TRACING_STILL_WORKS = "use `profile` (timing, torch.profiler) or `trace` (kernel and API tracing work here)"
STABLE_LEVEL = "profile_standard"


def release_verdict(gpu: Gpu, arch: dict[str, Any], rocm_version: str | None) -> Verdict | None:
    """Does this ROCm release's rocprofiler-sdk define counters for this architecture? (rocprofv3's
    question: legacy rocprof has its own list, `rocprof_v1_counters`.)"""
    family = arch.get("family", "unknown family")
    since = arch.get("counters_since")
    if since is None:
        return Verdict(False, f"{gpu.arch} ({family}) has no counter definitions in any rocprofiler-sdk release "
                       "profilectl knows of; the profilers list no counters or abort", TRACING_STILL_WORKS,
                       cause="arch-unsupported")
    release = version_tuple(rocm_version)
    if release and release < version_tuple(str(since)):
        return Verdict(False, f"{gpu.arch} ({family}) gets hardware counters from ROCm {since} on; ROCm {rocm_version}'s "
                       "rocprofiler-sdk defines none for it, so counter collection aborts or lists nothing",
                       f"use ROCm {since} or later; until then {TRACING_STILL_WORKS}", cause="rocm-too-old-for-arch")
    return None


def perf_level_verdict(gpu: Gpu, amd_index: int, ready: Verdict) -> Verdict:
    """RDNA counters read zero in some blocks unless the GPU is in the stable power state."""
    level = gpu.perf_level
    fix = (f"amd-smi set -g {amd_index} -l stable_std (as root; back with -l auto), or echo profile_standard > "
           "/sys/class/drm/cardN/device/power_dpm_force_performance_level")
    if level == STABLE_LEVEL:
        return Verdict(True, f"{ready.reason}; performance level {STABLE_LEVEL} (stable) as counters need", cause=None)
    if level is None:
        return Verdict(True, f"{ready.reason}, but this GPU's performance level could not be read: {gpu.family} "
                       f"counters read zero unless it is {STABLE_LEVEL}", fix, cause="perf-level-unknown")
    if level not in PERF_LEVELS:
        return Verdict(True, f"{ready.reason}, but the performance level reads {level!r}, which profilectl does not "
                       f"know: {gpu.family} counters read zero unless it is {STABLE_LEVEL}", fix,
                       cause="perf-level-unknown")
    return Verdict(True, f"{ready.reason}, but under the GPU's {level!r} performance level some counter blocks read "
                   f"zero on {gpu.family}: set the stable level first", fix,
                   cause="perf-level-auto" if level == "auto" else "perf-level-not-stable")


def amd_counter_support(facts: Facts, machine: Machine) -> Verdict:
    """Hardware counters on the first AMD GPU, without running anything."""
    gpu = facts.first_gpu("amd")
    if gpu is None:
        return Verdict(False, "no AMD GPU found", cause="no-amd-gpu")
    arch = data.arch_facts("amd", gpu.arch)
    library = aqlprofile_library(machine, facts.rocm.root)
    if not library.available:
        return library
    access = privileges(facts)
    if not access.available:
        return access
    if not arch:
        return Verdict(True, f"{gpu.arch or 'this GPU'} is not in profiling/gpus.yaml; counters may work",
                       "run `env-check --deep` to test it live", cause="arch-unknown")
    ready = Verdict(True, f"{gpu.arch} ({arch.get('family')}) supports hardware counters; {library.reason}")
    if arch.get("stable_perf_level"):
        amd_index = [g.index for g in facts.gpus if g.vendor == "amd"].index(gpu.index)
        return perf_level_verdict(gpu, amd_index, ready)
    return ready
