"""service + request + EnvReport -> Plan: the backend, its exact argv, the fallbacks tried and why.

The choice is generic: walk the service's backends in SERVICE_ORDER, take the first whose
`available()` says yes, and keep every refusal as a recorded fallback. No backend is special-cased.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilectl import countersets
from profilectl.backends import BACKENDS, SERVICE_ORDER, Backend, Step
from profilectl.backends.base import NO_VENDOR_GPU
from profilectl.backends import rocprofv3
from profilectl.backends.rocprofv3 import preset_names
from profilectl.errors import UnavailableError, UsageError
from profilectl.probe.report import EnvReport, ServiceChoice, Verdict
from profilectl.request import Request

# Extra phases a service adds when their backend is available (profile: torch tables for PyTorch).
SERVICE_EXTRAS = {"profile": ("torch",)}


@dataclass
class Phase:
    backend: str
    raw_dir: str  # where this phase's tool writes, relative to the run directory
    steps: list[Step]
    environment: dict[str, str]
    input_files: dict[str, str] = field(default_factory=dict)  # path relative to run dir -> text


@dataclass
class Plan:
    service: str
    backend: str
    reason: str
    fallbacks: list[dict[str, str]]
    phases: list[Phase]
    workload: list[str]
    workload_source: str
    run_dir: str
    tool: dict[str, Any] | None = None
    counter_set: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    request: Request | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("request")
        return out


def choose(service: str, env: EnvReport, request: Request) -> tuple[Backend | None, Verdict, list[dict[str, str]]]:
    """The first available backend for the service, the verdict, and the refusals before it."""
    fallbacks: list[dict[str, str]] = []
    for name in SERVICE_ORDER[service]:
        backend = BACKENDS[name]
        verdict = backend.available(env, request)
        if verdict.available:
            return backend, verdict, fallbacks
        fallbacks.append({"backend": name, "reason": verdict.reason,
                          **{k: v for k, v in (("fix", verdict.fix), ("cause", verdict.cause)) if v}})
    return None, _most_relevant(fallbacks, env), fallbacks


def _most_relevant(fallbacks: list[dict[str, str]], env: EnvReport) -> Verdict:
    """The refusal that speaks about this machine (not 'no NVIDIA GPU' on an AMD host)."""
    for entry in fallbacks:
        if entry.get("cause") != NO_VENDOR_GPU:
            return Verdict(False, entry["reason"], entry.get("fix"), cause=entry.get("cause"))
    if not env.gpus:
        return Verdict(False, "no GPU found: hardware counters need an AMD or NVIDIA GPU and its profiler",
                       "run on a GPU host with the device grants (see README), or use `profile`")
    return Verdict(False, fallbacks[0]["reason"] if fallbacks else "no backend")


def validate_request(request: Request) -> None:
    """Mistakes in the request are usage errors (exit 2), found before the machine is judged."""
    if request.timeout_s is not None and request.timeout_s <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if request.repeat < 1 or request.warmup < 0:
        raise UsageError("--repeat must be at least 1 and --warmup at least 0")
    if request.service == "trace":
        presets = preset_names()
        if request.preset not in presets:
            close = difflib.get_close_matches(request.preset, list(presets), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown preset {request.preset!r}{hint}; presets: {', '.join(presets)}")
    if request.service == "counters":
        countersets.load(request.counter_set, None, None)  # exists and parses (YAML or pmc: lines)
    program = request.workload[0] if request.workload else ""
    found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
    if not found:
        where = "is not an executable file" if os.sep in program else "was not found on PATH"
        raise UsageError(f"workload program {program!r} {where}")


def make_plan(request: Request, env: EnvReport, run_dir: Path,
              list_counters=None) -> Plan:
    """Builds the plan. `list_counters(argv) -> str|None` lists the GPU's counters for validation;
    None skips validation (dry runs run nothing)."""
    validate_request(request)
    if request.backend:
        if request.backend not in BACKENDS:
            raise UsageError(f"unknown backend {request.backend!r}; backends: {', '.join(BACKENDS)}")
        backend = BACKENDS[request.backend]
        verdict = backend.available(env, request)
        if not verdict.available:
            fix = f" Fix: {verdict.fix}" if verdict.fix else ""
            raise UnavailableError(f"backend {backend.name} cannot run {request.service} here: {verdict.reason}.{fix}")
        fallbacks: list[dict[str, str]] = []
        reason = f"forced with --backend; {verdict.reason}"
    else:
        backend, verdict, fallbacks = choose(request.service, env, request)
        reason = verdict.reason
        if backend is None:
            if request.service == "counters" and request.fallback:
                fallen = dataclasses.replace(request, service="profile")
                plan = make_plan(fallen, env, run_dir, list_counters)
                plan.fallbacks = fallbacks + [{"backend": "counters", "reason": verdict.reason,
                                               "fix": verdict.fix or ""}] + plan.fallbacks
                plan.reason = f"counters unavailable ({verdict.reason}); --fallback ran profile instead: {plan.reason}"
                plan.service = "counters"
                return plan
            fix = f" Fix: {verdict.fix}" if verdict.fix else ""
            hint = " (or pass --fallback to run `profile` instead)" if request.service == "counters" else ""
            raise UnavailableError(f"{request.service} unavailable: {verdict.reason}.{fix}{hint}")

    notes: list[str] = []
    counter_info = None
    input_files: dict[str, str] = {}
    if request.service == "counters":
        counter_info, input_files = _resolve_counters(request, env, backend, notes, list_counters)
    notes += backend.plan_notes(request, env)

    phases = [_phase(backend, request, env, run_dir, "raw", input_files)]
    for extra in SERVICE_EXTRAS.get(request.service, ()):
        extra_backend = BACKENDS[extra]
        extra_verdict = extra_backend.available(env, request)
        if extra_verdict.available and extra_backend is not backend:
            phases.append(_phase(extra_backend, request, env, run_dir, f"raw/{extra}", {}))
            notes.append(f"also {extra}: {extra_verdict.reason}")
        else:
            notes.append(f"no {extra} phase: {extra_verdict.reason}")
    tool = backend.tool(env)
    return Plan(service=request.service, backend=backend.name, reason=reason, fallbacks=fallbacks,
                phases=phases, workload=list(request.workload), workload_source=request.workload_source,
                run_dir=str(run_dir), tool=dataclasses.asdict(tool) if tool else None,
                counter_set=counter_info, notes=notes, request=request)


def _phase(backend: Backend, request: Request, env: EnvReport, run_dir: Path, raw: str,
           input_files: dict[str, str]) -> Phase:
    environment = backend.environment(request)
    environment.update(request.env_overrides)  # the user's word wins
    return Phase(backend=backend.name, raw_dir=raw, steps=backend.steps(request, env, run_dir / raw),
                 environment=environment, input_files=input_files)


def _resolve_counters(request: Request, env: EnvReport, backend: Backend, notes: list[str],
                      list_counters) -> tuple[dict[str, Any], dict[str, str]]:
    vendor = backend.vendor
    gpu = env.first_gpu(vendor)
    counter_set = countersets.load(request.counter_set, vendor, gpu.arch if gpu else None)
    if not counter_set.counters:
        raise UsageError(f"counter set {counter_set.name} has no {vendor} counters")
    request.counters = counter_set.counters
    list_argv = backend.list_counters_argv(env)
    if list_counters is not None and list_argv:
        listing = list_counters(list_argv)
        available = backend.parse_counter_list(listing) if listing else set()
        if available:
            where = f"{gpu.name or gpu.arch} ({backend.name})" if gpu else backend.name
            countersets.validate(counter_set.counters, available, where, key=backend.counter_key)
            notes.append(f"{len(counter_set.counters)} counters validated against the {len(available)} this GPU lists")
        else:
            notes.append("could not list this GPU's counters; names not validated before the run")
    elif list_counters is None:
        notes.append("counter names not validated (dry run)")
    request.passes = backend.counter_passes(counter_set)
    text = backend.input_file(request.passes)
    input_files = {"raw/input.txt": text} if text else {}
    info = {"name": counter_set.name, "source": counter_set.source, "counters": counter_set.counters,
            "passes": request.passes, "derived": counter_set.derived}
    return info, input_files


def assess(env: EnvReport) -> None:
    """Fills env.capabilities and env.services from the backends' own verdicts."""
    sample = ["python3", "workload.py"]
    for service in SERVICE_ORDER:
        backend, verdict, fallbacks = choose(service, env, Request(service=service, workload=sample))
        env.services[service] = ServiceChoice(backend=backend.name if backend else None,
                                              reason=verdict.reason, fallbacks=fallbacks)
    counters = env.services["counters"]
    counter_verdict = (Verdict(True, counters.reason, backend=counters.backend) if counters.backend else
                       _most_relevant(counters.fallbacks, env))
    env.capabilities["counters"] = counter_verdict

    trace = env.services["trace"]
    if trace.backend and BACKENDS[trace.backend].traces_gpu(env):
        env.capabilities["tracing"] = Verdict(True, trace.reason, backend=trace.backend)
    else:
        why = "no GPU found" if not env.gpus else "no GPU tracer (rocprofv3, rocprof, or PyTorch with GPU support) found"
        env.capabilities["tracing"] = Verdict(False, f"{why}; trace falls back to {trace.backend}",
                                              "install ROCm's rocprofiler-sdk, or PyTorch built for your GPU",
                                              backend=trace.backend)
    env.capabilities["pc_sampling"] = _pc_sampling(env)
    env.capabilities["timing"] = Verdict(True, "wall-clock timing needs no profiler", backend="timing")


def _pc_sampling(env: EnvReport) -> Verdict:
    from profilectl import data
    gpu = env.first_gpu("amd")
    if gpu is None:
        return Verdict(False, "PC sampling is offered by rocprofv3 on AMD Instinct GPUs only; none found")
    methods = data.arch_facts("amd", gpu.arch).get("pc_sampling") or []
    if not methods:
        return Verdict(False, f"{gpu.arch} has no PC sampling support in rocprofv3",
                       "PC sampling needs gfx90a (host trap) or gfx942/gfx950 (host trap, stochastic)")
    since = rocprofv3.tool_facts()["options"]["--pc-sampling-method"]  # profiling/tools/rocprofv3.yaml
    if env.tool("rocprofv3") is None:
        return Verdict(False, "rocprofv3 not found", f"install rocprofiler-sdk (ROCm {since}+)")
    if env.rocm.version and not rocprofv3.has("options", "--pc-sampling-method", rocprofv3.rocm_release(env)):
        return Verdict(False, f"ROCm {env.rocm.version} has no PC sampling in rocprofv3", f"use ROCm {since} or later")
    counters = env.checks.get("amd_counters")
    if counters is not None and counters.cause == "missing-perfmon":
        return Verdict(False, counters.reason, counters.fix)
    return Verdict(True, f"rocprofv3 PC sampling on {gpu.arch}: {', '.join(methods)}", backend="rocprofv3")
