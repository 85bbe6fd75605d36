"""Facts about the machine, each read from one named source, never guessed.

Sources, in the order they are tried:
- AMD GPUs: the KFD topology in sysfs (no process to start), then rocminfo, then rocm-smi.
- NVIDIA GPUs: nvidia-smi, then /proc/driver/nvidia/gpus.
- ROCm: $ROCM_PATH, /opt/rocm/.info/version, hipconfig.
- Privileges: /proc/self/status (CapEff, Uid), /proc/sys/kernel/perf_event_paranoid,
  /proc/driver/nvidia/params (RmProfilingAdminOnly), container markers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from profilectl import data
from profilectl.probe import facts_cache
from profilectl.probe.machine import Machine, in_background
from profilectl.facts import DeviceNode, Devices, Gpu, Host, Rocm, Tool, Torch

# Linux capability bit numbers (include/uapi/linux/capability.h) that matter for profiling.
CAPABILITY_BITS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "SETUID": 7, "SETGID": 6, "SYS_RAWIO": 17,
    "SYS_PTRACE": 19, "SYS_ADMIN": 21, "PERFMON": 38, "BPF": 39,
}

PROFILER_TOOLS = ("rocprofv3", "rocprofv3-avail", "rocpd", "rocprof", "rocprofv2", "rocprof-compute",
                  "rocprof-sys-run", "ncu", "nsys")
INFO_TOOLS = ("rocminfo", "rocm-smi", "amd-smi", "nvidia-smi", "hipconfig")
_VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)*(?:[-.][0-9A-Za-z]+)?)")
# Tools whose --version is slow or absent: their version is not worth a process start.
_NO_VERSION_FLAG = {"rocprofv3-avail", "rocpd", "rocprof", "rocprofv2", "rocm-smi", "rocminfo", "amd-smi",
                    "rocprof-sys-run"}


# ---------------------------------------------------------------- GPUs
def gfx_name(target_version: int) -> str:
    """KFD's gfx_target_version (major*10000 + minor*100 + stepping) as a gfx name: 90010 -> gfx90a."""
    major, rest = divmod(target_version, 10000)
    minor, stepping = divmod(rest, 100)
    return f"gfx{major}{minor:x}{stepping:x}"


def _kv_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            out[parts[0]] = parts[1].strip()
    return out


def amd_gpus_from_kfd(machine: Machine) -> list[Gpu]:
    gpus: list[Gpu] = []
    nodes = machine.glob("/sys/class/kfd/kfd/topology/nodes/*/properties")
    for props_path in sorted(nodes, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0):
        props = _kv_lines(props_path.read_text(errors="replace"))
        target = int(props.get("gfx_target_version", "0") or 0)
        if not target or int(props.get("simd_count", "0") or 0) == 0:
            continue  # a CPU node
        memory = 0
        for bank in sorted(props_path.parent.glob("mem_banks/*/properties")):
            memory += int(_kv_lines(bank.read_text(errors="replace")).get("size_in_bytes", "0") or 0)
        minor = props.get("drm_render_minor", "")
        level = perf_level(machine, f"/sys/class/drm/renderD{minor}/device") if minor.isdigit() else None
        gpus.append(Gpu(index=len(gpus), vendor="amd", arch=gfx_name(target),
                        memory_bytes=memory or None, source="kfd-topology", perf_level=level))
    return gpus


PERF_LEVELS = ("auto", "low", "high", "manual", "profile_standard", "profile_min_sclk", "profile_min_mclk",
               "profile_peak", "perf_determinism")  # amdgpu_pm.c power_dpm_force_performance_level


def perf_level(machine: Machine, device_dir: str) -> str | None:
    """The GPU's performance level as the amdgpu driver shows it (kept verbatim: an unknown word is
    judged, not dropped)."""
    text = machine.read(f"{device_dir}/power_dpm_force_performance_level")
    return (text.strip() or None) if text is not None else None


def card_perf_levels(machine: Machine) -> list[str | None]:
    """Performance levels of the amdgpu cards in card order (when the KFD topology is not readable)."""
    cards = [p for p in machine.glob("/sys/class/drm/card*/device/power_dpm_force_performance_level")
             if p.parent.parent.name[4:].isdigit()]
    cards.sort(key=lambda p: int(p.parent.parent.name[4:]))
    return [perf_level(machine, "/" + str(p.parent.relative_to(machine.root))) for p in cards]


def amd_gpus_from_rocminfo(machine: Machine) -> list[Gpu]:
    if not machine.which("rocminfo"):
        return []
    result = machine.run(["rocminfo"])
    if not result.ok:
        return []
    gpus: list[Gpu] = []
    for block in re.split(r"\n\*{5,}\s*\n", result.stdout):
        if not re.search(r"Device Type:\s*GPU", block):
            continue
        arch = re.search(r"^\s*Name:\s*(gfx[0-9a-f]+)", block, re.M)
        name = re.search(r"^\s*Marketing Name:\s*(.+)$", block, re.M)
        gpus.append(Gpu(index=len(gpus), vendor="amd", arch=arch.group(1) if arch else None,
                        name=name.group(1).strip() if name else None, source="rocminfo"))
    return gpus


def amd_gpus_from_rocm_smi(machine: Machine) -> list[Gpu]:
    if not machine.which("rocm-smi"):
        return []
    result = machine.run(["rocm-smi"])
    if not result.ok:
        return []
    rows = [line for line in result.stdout.splitlines() if re.match(r"^\d+\s+\d+\s+0x", line)]
    return [Gpu(index=i, vendor="amd", arch=None, source="rocm-smi") for i, _ in enumerate(rows)]


def nvidia_gpus(machine: Machine) -> list[Gpu]:
    smi = machine.which("nvidia-smi")
    if smi:
        listed = _nvidia_smi_gpus(machine) if not machine.remember else facts_cache.remembered(
            "nvidia-gpus", facts_cache.nvidia_gpu_key(machine, smi), lambda: _with_smi(_nvidia_smi_gpus(machine), smi),
            lambda gpus: [dataclasses.asdict(g) for g in gpus], lambda saved: [Gpu(**g) for g in saved])
        if listed:
            return listed
    gpus: list[Gpu] = []
    for info in machine.glob("/proc/driver/nvidia/gpus/*/information"):
        model = re.search(r"^Model:\s*(.+)$", info.read_text(errors="replace"), re.M)
        gpus.append(Gpu(index=len(gpus), vendor="nvidia", arch=None,
                        name=model.group(1).strip() if model else None, source="proc-driver-nvidia"))
    return gpus


def _with_smi(gpus: list[Gpu], smi: str) -> tuple[list[Gpu], list[str] | None]:
    """A listing worth keeping (nvidia-smi answered) with its witnesses: nvidia-smi itself."""
    return gpus, ([smi, os.path.realpath(smi)] if gpus else None)


def _nvidia_smi_gpus(machine: Machine) -> list[Gpu]:
    """The GPUs nvidia-smi lists (empty when it fails or lists none)."""
    result = machine.run(["nvidia-smi", "--query-gpu=index,name,memory.total,compute_cap",
                          "--format=csv,noheader,nounits"])
    if not result.ok:
        return []
    gpus: list[Gpu] = []
    for line in result.stdout.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            continue
        index, name, mem_mib, cc = fields[:4]
        arch = "sm_" + cc.replace(".", "") if re.fullmatch(r"\d+\.\d+", cc) else None
        memory = int(float(mem_mib) * 1024 * 1024) if re.fullmatch(r"[\d.]+", mem_mib) else None
        gpus.append(Gpu(index=int(index) if index.isdigit() else len(gpus), vendor="nvidia",
                        arch=arch, name=name, memory_bytes=memory, source="nvidia-smi"))
    return gpus


def gpus(machine: Machine) -> tuple[Gpu, ...]:
    found = amd_gpus_from_kfd(machine)
    if not found:
        found = amd_gpus_from_rocminfo(machine) or amd_gpus_from_rocm_smi(machine)
        levels = card_perf_levels(machine)
        found = [dataclasses.replace(g, perf_level=levels[i]) if i < len(levels) else g for i, g in enumerate(found)]
    found += nvidia_gpus(machine)
    named = []
    for index, gpu in enumerate(found):
        facts = data.arch_facts(gpu.vendor, gpu.arch)
        named.append(dataclasses.replace(gpu, index=index, family=facts.get("family"),
                                         name=gpu.name or facts.get("product")))
    return tuple(named)


# ---------------------------------------------------------------- ROCm
def rocm(machine: Machine) -> Rocm:
    candidates = [machine.env.get("ROCM_PATH"), machine.env.get("ROCM_HOME"), "/opt/rocm"]
    for root in filter(None, candidates):
        text = machine.read(f"{root}/.info/version")
        if text and text.strip():
            return Rocm(version=text.strip().splitlines()[0], root=root, source=f"{root}/.info/version")
    hipconfig = machine.which("hipconfig")
    if hipconfig:
        result = machine.run([hipconfig, "--version"])
        match = _VERSION_RE.search(result.stdout) if result.ok else None
        if match:
            return Rocm(version=match.group(1), root=str(Path(hipconfig).resolve().parent.parent),
                        source="hipconfig --version")
    for root in filter(None, candidates):
        if machine.exists(f"{root}/bin") or machine.exists(f"{root}/lib"):
            return Rocm(version=None, root=root, source=f"{root} exists, no .info/version")
    return Rocm(version=None, root=None, source=None)


def version_tuple(version: str | None) -> tuple[int, ...]:
    """'6.4.1-120' -> (6, 4, 1). Unknown versions sort first."""
    if not version:
        return ()
    match = re.match(r"(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


# ---------------------------------------------------------------- tools
def _search_path(machine: Machine, rocm_root: str | None) -> str:
    extra = []
    if rocm_root:
        extra.append(str(machine.file(f"{rocm_root}/bin")))
    extra += [str(p) for p in machine.glob("/opt/nvidia/nsight-compute/*")]
    extra += [str(p) for p in machine.glob("/opt/nvidia/nsight-systems/*/bin")]  # Nsight Systems' own installer
    extra.append(str(machine.file("/usr/local/cuda/bin")))
    return os.pathsep.join([machine.path] + extra)


def tools(machine: Machine, rocm_root: str | None) -> dict[str, Tool]:
    search = Machine(root=machine.root, path=_search_path(machine, rocm_root), env=machine.env,
                     timeout_s=machine.timeout_s)
    found = {name: search.which(name) for name in PROFILER_TOOLS + INFO_TOOLS}
    found = {name: path for name, path in found.items() if path}

    def version_of(item: tuple[str, str]) -> Tool:
        name, path = item
        if name in _NO_VERSION_FLAG:
            return Tool(name, path, None)

        def ask() -> tuple[str | None, list[str] | None]:
            result = search.run([path, "--version"])
            match = _VERSION_RE.search(_version_line(name, result.output)) if not result.error else None
            # a version printed by a tool that ran well is the file's; a failure (a timeout, a missing
            # library or program) may pass, so it is asked again next time
            keep = facts_cache.tool_version_witnesses(path, machine.root) if result.ok else None
            return (match.group(1) if match else None), keep

        if not machine.remember:
            return Tool(name, path, ask()[0])
        # the same file (and driver) prints the same version: kept per path, asked again when either changes
        version = facts_cache.remembered("tool-version", [name, path, search.path], ask, lambda v: v,
                                         lambda v: v if isinstance(v, str) or v is None else None)
        return Tool(name, path, version)

    started = [in_background(version_of, item) for item in found.items()]  # side by side
    return {tool.name: tool for tool in (result() for result in started)}


def _version_line(name: str, output: str) -> str:
    # ncu prints a banner first; rocprofv3 prints "rocprofiler-sdk version: 1.0.0 (...)".
    for line in output.splitlines():
        low = line.lower()
        if name == "ncu" and "version" in low:
            return line.split("ersion", 1)[1]
        if name == "rocprofv3" and "rocprofiler-sdk" in low and "version" in low:
            return line.split("ersion", 1)[1]
        if name == "nsys" and "nsight systems version" in low:  # "NVIDIA Nsight Systems version 2024.5.1.113-..."
            return line.split("ersion", 1)[1]
    return output


# ---------------------------------------------------------------- privileges
def capability_names(cap_hex: str) -> list[str]:
    value = int(cap_hex, 16)
    return sorted(name for name, bit in CAPABILITY_BITS.items() if value >> bit & 1)


def host(machine: Machine) -> Host:
    status = {}
    for line in (machine.read("/proc/self/status") or "").splitlines():
        key, _, value = line.partition(":")
        status[key.strip()] = value.strip()
    caps = capability_names(status["CapEff"]) if "CapEff" in status else []
    uid_fields = status.get("Uid", "").split()
    uid = int(uid_fields[1]) if len(uid_fields) > 1 else os.geteuid()
    groups = [int(g) for g in status.get("Groups", "").split() if g.isdigit()]

    paranoid_text = (machine.read("/proc/sys/kernel/perf_event_paranoid") or "").strip()
    nv_params = machine.read("/proc/driver/nvidia/params")
    admin_only = None
    if nv_params is not None:
        match = re.search(r"RmProfilingAdminOnly:\s*(\d+)", nv_params)
        admin_only = bool(int(match.group(1))) if match else None

    evidence = None
    if machine.exists("/.dockerenv"):
        evidence = "/.dockerenv"
    elif machine.exists("/run/.containerenv"):
        evidence = "/run/.containerenv"
    elif machine.env.get("container"):
        evidence = f"container={machine.env['container']}"
    else:
        cgroup = machine.read("/proc/1/cgroup") or ""
        match = re.search(r"(docker|kubepods|containerd|libpod)", cgroup)
        evidence = f"/proc/1/cgroup mentions {match.group(1)}" if match else None

    kernel = (machine.read("/proc/sys/kernel/osrelease") or "").strip() or None
    hostname = (machine.read("/proc/sys/kernel/hostname") or "").strip() or _hostname()
    return Host(hostname=hostname, kernel=kernel, in_container=evidence is not None,
                container_evidence=evidence, uid=uid, effective_capabilities=tuple(caps),
                perf_event_paranoid=int(paranoid_text) if re.fullmatch(r"-?\d+", paranoid_text) else None,
                nvidia_profiling_admin_only=admin_only, devices=devices(machine), groups=tuple(groups))


def _hostname() -> str:
    import socket
    return socket.gethostname()


def devices(machine: Machine) -> Devices:
    def node(absolute: str) -> DeviceNode:
        path = machine.file(absolute)
        try:
            st = path.stat()
        except OSError:
            return DeviceNode(path=absolute, exists=False, accessible=False)
        return DeviceNode(path=absolute, exists=True, gid=st.st_gid, accessible=os.access(path, os.R_OK | os.W_OK))

    render = tuple(node("/dev/" + str(p.relative_to(machine.file("/dev"))))
                   for p in machine.glob("/dev/dri/renderD*"))
    nvidia = tuple(node("/dev/" + p.name) for p in machine.glob("/dev/nvidia*")
                   if p.name[6:].isdigit() or p.name == "nvidiactl")
    return Devices(kfd=node("/dev/kfd"), render=render, nvidia=nvidia)


# ---------------------------------------------------------------- PyTorch
# Runs in the workload's interpreter; reads torch/version.py without importing torch (import costs
# seconds, and a broken GPU runtime must not break env-check).
_TORCH_SCRIPT = r"""
import importlib.util, json, os, re, sys
spec = importlib.util.find_spec("torch")
out = {"python": sys.executable, "path": None, "version": None, "cuda": None, "hip": None}
if spec and spec.origin:
    out["path"] = os.path.dirname(spec.origin)
    try:
        text = open(os.path.join(out["path"], "version.py")).read()
        for key, name in (("version", "__version__"), ("cuda", "cuda"), ("hip", "hip")):
            m = re.search(r"^%s\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]" % name, text, re.M)
            out[key] = m.group(1) if m else None
    except OSError:
        pass
# what the answer came from: the interpreter, every folder searched (a package installed there
# changes it), its .pth files, the user site folder, pyvenv.cfg and torch's version.py
seen = [sys.executable, os.path.join(sys.prefix, "pyvenv.cfg")]
for entry in sys.path:
    folder = os.path.abspath(entry or os.getcwd())
    seen.append(folder)
    try:
        seen += [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".pth")]
    except OSError:
        pass
try:
    import site
    seen.append(site.getusersitepackages())
except Exception:
    pass
if out["path"]:
    seen += [out["path"], os.path.join(out["path"], "version.py")]
out["witnesses"] = seen
print(json.dumps(out))
"""


def torch(machine: Machine, python: str | None = None) -> Torch:
    """PyTorch of `python` (default: python3 on the machine's PATH), read without importing it."""
    python = python or machine.which("python3") or machine.which("python")
    if not python:
        return Torch(version=None, backend=None)
    interpreter = python
    cwd = _cwd() if machine.remember else ""

    def ask() -> tuple[dict[str, Any], list[str] | None]:
        """The interpreter's answer, and the files it came from (None: not to be kept)."""
        result = machine.run([interpreter, "-c", _TORCH_SCRIPT])
        try:
            info = json.loads(result.stdout.strip().splitlines()[-1]) if result.ok else {}
        except (ValueError, IndexError):
            info = {}
        if not isinstance(info, dict):
            return {}, None
        seen = info.pop("witnesses", None)
        if not cwd or not isinstance(seen, list) or not all(isinstance(p, str) for p in seen):
            return info, None  # an answer without its sources (or from a vanished folder) is not kept
        return info, [interpreter, *seen, *facts_cache.shim_witnesses(interpreter, cwd, machine.env)]

    if machine.remember:  # kept per interpreter, working folder and Python environment, while what it read stands
        info = facts_cache.remembered("torch", [python, cwd, *facts_cache.env_key(machine.env)], ask,
                                      lambda v: v, lambda v: v if isinstance(v, dict) else {})
    else:
        info = ask()[0]
    if not info.get("version"):
        return Torch(version=None, backend=None, python=info.get("python") or python)
    backend = "rocm" if info.get("hip") else "cuda" if info.get("cuda") else "cpu"
    return Torch(version=info["version"], backend=backend, path=info.get("path"), python=info.get("python"),
                 hip=info.get("hip"), cuda=info.get("cuda"))


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # a working folder that is gone: sys.path[0] cannot be named, so nothing is kept
        return ""
