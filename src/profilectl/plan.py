"""plan(facts, request) -> Plan: everything decided before anything runs.

The backend (the first available one of the service's SERVICE_ORDER, every refusal kept as a
fallback), the resolved counter set and its passes, each phase's exact argv, environment and input
files, and the run directory. No backend is special-cased, and nothing here writes into its input:
the Plan is a new frozen value. `assess(facts)` is the same choice made for env-check.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from profilectl import countersets, privilege
from profilectl.backends import BACKENDS, SERVICE_ORDER, Backend, Job, Step, StepResult
from profilectl.backends.base import NO_VENDOR_GPU, SizedRuns, step_marks_env
from profilectl.backends.rocprofv3 import presets
from profilectl.countersets import CounterPlan
from profilectl.envreport import Assessment, Fallback, ServiceChoice
from profilectl.errors import UnavailableError, UsageError
from profilectl.facts import Facts, Tool, Verdict
from profilectl.privilege import Privilege
from profilectl.probe.machine import CommandResult
from profilectl.request import Request, absent_ranks, ranks_text
from profilectl.telemetry.model import SamplingPlan
from profilectl.telemetry.plan import plan_sampling

PLAN_SCHEMA = 1
# Extra phases a service adds when their backend is available (profile: torch tables for PyTorch).
SERVICE_EXTRAS = {"profile": ("torch",)}
# profile's torch.profiler phase (--torch-pass): auto runs it when cheap, always and never as said.
TORCH_PASS_CHOICES = ("auto", "always", "never")
# "Cheap": one more run (the torch pass is one profiled run of the workload) costs at most this share
# of the time the timed runs already took: 1 warm-up + 5 runs is 17 %, a 14 s training job run once 100 %.
CHEAP_SHARE = 0.25

ListCounters = Callable[[list[str]], CommandResult]  # runs a tool's counter-listing command


@dataclass(frozen=True)
class Phase:
    """One phase of a run's plan: a backend's steps, the folder its tool writes to, their environment and input
    files, and when it runs."""
    backend: str
    raw_dir: str  # where this phase's tool writes, relative to the run directory
    steps: tuple[Step, ...]
    environment: dict[str, str]
    input_files: dict[str, str] = field(default_factory=dict)  # path relative to the run dir -> text
    # "always", or "cheap": runs only when one more run costs at most CHEAP_SHARE of the steps before it
    when: str = "always"


@dataclass(frozen=True)
class Plan:
    """What a run will do, decided before it starts: the service, the backend and why, the fallbacks, its phases,
    workload and run folder."""
    service: str
    backend: str
    reason: str
    fallbacks: tuple[Fallback, ...]
    phases: tuple[Phase, ...]
    workload: tuple[str, ...]
    workload_source: str
    run_dir: str
    request: Request
    tool: Tool | None = None
    counter_set: CounterPlan | None = None
    notes: tuple[str, ...] = ()
    ran_as: str = ""  # the service whose commands run: `service`, or profile for counters --fallback
    sampling: SamplingPlan | None = None  # GPU power/memory sampling while the steps run (None: none)
    # who the profiler and the workload run as, and the capabilities they keep (privilege.py)
    privilege: Privilege = field(default_factory=lambda: Privilege(privilege.INVOKER))
    schema_version: int = PLAN_SCHEMA

    @property
    def argv(self) -> tuple[str, ...]:
        """The main command (the first step of the first phase), as the manifest shows it."""
        return self.phases[0].steps[0].argv if self.phases and self.phases[0].steps else ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def redacted(self) -> "Plan":
        """The plan as shown (dry run) and stored: secret-looking values of the workload's arguments
        and environment replaced (profilectl/redaction.py, the rule in profiling/redaction.yaml;
        request.redact False: --no-redact); the processes themselves get the real values."""
        from profilectl.redaction import redactor
        shown = redactor(self.request.redact)
        attach = self.request.attach  # a running process's command line, as /proc showed it
        request = dataclasses.replace(self.request, env_overrides=shown.env(self.request.env_overrides),
                                      workload=shown.argv(self.request.workload),
                                      attach=dataclasses.replace(attach, cmdline=shown.argv(attach.cmdline))
                                      if attach is not None else None)
        phases = tuple(dataclasses.replace(
            p, environment=shown.env(p.environment),
            steps=tuple(dataclasses.replace(s, argv=shown.argv(s.argv), env=shown.env(s.env)) for s in p.steps))
            for p in self.phases)
        return dataclasses.replace(self, request=request, phases=phases, workload=shown.argv(self.workload),
                                   notes=tuple(shown.text(note) for note in self.notes))


# ------------------------------------------------------------------ choosing a backend
def _fallback(name: str, verdict: Verdict) -> Fallback:
    return Fallback(backend=name, reason=verdict.reason, fix=verdict.fix, cause=verdict.cause)


def verdict_of(backend: Backend, facts: Facts, request: Request) -> Verdict:
    """The backend's own verdict, after the one rule no backend can judge alone: a trace preset that
    names its backends (pc-sampling: rocprofv3) never falls back to a tracer that cannot do it."""
    allowed = presets().get(request.preset, {}).get("backends") if request.service == "trace" else None
    if allowed and backend.name not in allowed:
        return Verdict(False, f"the {request.preset} preset needs {' or '.join(allowed)}", cause="preset-backend")
    torch_only = [flag for flag, on in (("--shapes", request.record_shapes), ("--memory", request.memory_history))
                  if on]
    if torch_only and backend.name != "torch":
        return Verdict(False, f"{' and '.join(torch_only)} need torch.profiler (the workload's own PyTorch records "
                       "them)", cause="preset-backend")
    verdict = backend.available(facts, request)
    if request.attach is not None and (refusal := attach_refusal(backend.name)) and verdict.cause != NO_VENDOR_GPU:
        return refusal  # what attach cannot do with this tool, unless its GPU is not even here
    if verdict.available and isinstance(decided := privilege_of(backend, facts, request), Verdict):
        return decided  # it would need root's capabilities in another user's program
    return verdict


def privilege_of(backend: Backend, facts: Facts, request: Request) -> Privilege | Verdict:
    """Who this backend's processes run as, with what (privilege.py), or why it cannot run here."""
    return privilege.decide(backend.capabilities(facts, request), facts, request.run_for, request.as_root)


def attach_refusal(backend: str) -> Verdict | None:
    """What a backend cannot do with `--attach PID` (profiling/tools/attach.yaml; None: it can)."""
    from profilectl import data
    entry = (data.load_mapping("tools/attach.yaml").get("backends") or {}).get(backend)
    if not entry or entry.get("attaches"):
        return None
    return Verdict(False, str(entry["refusal"]), entry.get("fix"), cause="attach-unsupported")


def choose(service: str, facts: Facts, request: Request) -> tuple[Backend | None, Verdict, tuple[Fallback, ...]]:
    """The first available backend for the service, its verdict, and the refusals before it."""
    fallbacks: list[Fallback] = []
    for name in SERVICE_ORDER[service]:
        backend = BACKENDS[name]
        verdict = verdict_of(backend, facts, request)
        if verdict.available:
            return backend, verdict, tuple(fallbacks)
        fallbacks.append(_fallback(name, verdict))
    return None, _most_relevant(fallbacks, facts), tuple(fallbacks)


def _most_relevant(fallbacks: list[Fallback] | tuple[Fallback, ...], facts: Facts) -> Verdict:
    """The refusal that speaks about this machine (not 'no NVIDIA GPU' on an AMD host)."""
    for entry in fallbacks:
        if entry.cause not in (NO_VENDOR_GPU, "preset-backend"):
            return Verdict(False, entry.reason, entry.fix, cause=entry.cause)
    if not facts.gpus:
        return Verdict(False, "no GPU found: hardware counters need an AMD or NVIDIA GPU and its profiler",
                       "on this machine, `profile` times the workload (and gives PyTorch's operator tables)")
    return Verdict(False, fallbacks[0].reason if fallbacks else "no backend")


# ------------------------------------------------------------------ the request alone
def validate_request(request: Request) -> None:
    """Mistakes in the request are usage errors (exit 2), found before the machine is judged."""
    if request.timeout_s is not None and not (0 < request.timeout_s < float("inf")):
        raise UsageError("--timeout must be a positive number of seconds")
    if (request.repeat is not None and request.repeat < 1) or (request.warmup is not None and request.warmup < 0):
        raise UsageError("--repeat must be at least 1 (or auto) and --warmup at least 0")
    if request.torch_pass not in TORCH_PASS_CHOICES:
        raise UsageError(f"--torch-pass must be one of {', '.join(TORCH_PASS_CHOICES)}, got {request.torch_pass!r}")
    if request.service == "trace":
        known = presets()
        if request.preset not in known:
            close = difflib.get_close_matches(request.preset, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown preset {request.preset!r}{hint}; presets: {', '.join(known)}")
    if request.service == "counters":
        countersets.load(request.counter_set, None, None)  # exists and parses (YAML or pmc: lines)
    if request.attach is not None:
        if request.service not in ("trace", "counters"):
            raise UsageError(f"--attach is for trace and counters, not {request.service}")
        if request.attach.duration_s is not None and not (0 < request.attach.duration_s < float("inf")):
            raise UsageError("--duration must be a positive number of seconds")
        return  # the workload is the running target: nothing to find on PATH
    if request.ranks and not request.launch.multi_rank:
        raise UsageError("--ranks selects ranks of a multi-rank job (mpirun, srun); this workload is one process")
    absent = absent_ranks(request)
    if absent:
        size = request.launch.ranks or 0
        raise UsageError(f"--ranks {ranks_text(request.ranks)}: the job starts {size} rank(s), 0-{size - 1} "
                         f"({request.launch.launcher}'s command line); there is no rank {ranks_text(absent)}: "
                         "name ranks that exist, or start more ranks")
    program = request.workload[0] if request.workload else ""
    if not program:
        raise UsageError("no workload program given")
    request.launch  # a launcher with no program after it is a usage error, found here
    found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
    if not found or os.path.isdir(found):
        where = "is not an executable file" if os.sep in program else "was not found on PATH"
        from profilectl.launchers.base import launcher_facts
        why = launcher_facts().get(request.launch.launcher, {}).get("not_installed")
        raise UsageError(f"workload program {program!r} {where}" + (f": {why}" if why else ""))


# ------------------------------------------------------------------ the plan
def make_plan(request: Request, facts: Facts, run_dir: Path, list_counters: ListCounters | None = None) -> Plan:
    """Builds the plan. `list_counters(argv)` runs a tool's counter-listing command, to validate
    the names before the run; None skips validation (dry runs run nothing)."""
    validate_request(request)
    if request.backend:
        if request.backend not in BACKENDS:
            close = difflib.get_close_matches(request.backend, list(BACKENDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown backend {request.backend!r}{hint}; backends: {', '.join(BACKENDS)}")
        backend = BACKENDS[request.backend]
        verdict = verdict_of(backend, facts, request)
        if not verdict.available:
            fix = f" Fix: {verdict.fix}" if verdict.fix else ""
            raise UnavailableError(f"backend {backend.name} cannot run {request.service} here: {verdict.reason}.{fix}")
        chosen: Backend = backend
        fallbacks: tuple[Fallback, ...] = ()
        reason = f"forced with --backend; {verdict.reason}"
    else:
        found, verdict, fallbacks = choose(request.service, facts, request)
        reason = verdict.reason
        if found is None:
            if request.service == "counters" and request.fallback:
                return _counters_fallback(request, facts, run_dir, list_counters, verdict, fallbacks)
            fix = f" Fix: {verdict.fix}" if verdict.fix else ""
            hint = " (or pass --fallback to run `profile` instead)" if request.service == "counters" else ""
            raise UnavailableError(f"{request.service} unavailable: {verdict.reason}.{fix}{hint}")
        chosen = found
    if request.ranks and not chosen.selects_ranks:
        raise UsageError(f"--ranks: {chosen.name} cannot select ranks (rocprofv3 does); leave --ranks out")

    notes: list[str] = []
    counters = None
    if request.service == "counters":
        counters, counter_notes = resolve_counters(request, facts, chosen, list_counters)
        notes += counter_notes
    notes += chosen.plan_notes(request, facts)
    notes += _program_tracer_note(request, chosen, fallbacks)
    notes += _image_note(request, facts, fallbacks)
    extras = []
    for extra in SERVICE_EXTRAS.get(request.service, ()):
        extra_backend = BACKENDS[extra]
        extra_verdict = extra_backend.available(facts, request)
        if request.torch_pass == "never":
            notes.append(f"no {extra} phase: --torch-pass never")
        elif extra_verdict.available and extra_backend is not chosen:
            extras.append(extra_backend)
            when = "" if request.torch_pass == "always" else \
                f" (when cheap: one more run at most {CHEAP_SHARE * 100:.0f} % of the timed runs' time; --torch-pass always)"
            notes.append(f"also {extra}{when}: {extra_verdict.reason}")
        else:
            notes.append(f"no {extra} phase: {extra_verdict.reason}")
    sampling, sampling_note = plan_sampling(request.sample, facts, {**os.environ, **request.env_overrides})
    notes += [sampling_note] if sampling_note else []
    if request.live:
        notes.append(_live_note(request, sampling))
    tool = chosen.tool(facts)
    decided = privilege_of(chosen, facts, request)
    assert isinstance(decided, Privilege)  # a refusal made the backend unavailable above
    if decided.run_as != privilege.INVOKER:  # profilectl's own rights are the default: said (plan.privilege) only in JSON
        notes.append(decided.note())
    plan = Plan(service=request.service, backend=chosen.name, reason=reason, fallbacks=fallbacks, phases=(),
                workload=request.workload, workload_source=request.workload_source, run_dir=str(run_dir),
                request=request, tool=tool, counter_set=counters, notes=tuple(notes), ran_as=request.service,
                sampling=sampling, privilege=decided)
    return dataclasses.replace(plan, phases=_phases(plan, facts, chosen, extras, run_dir))


def _counters_fallback(request: Request, facts: Facts, run_dir: Path, list_counters: ListCounters | None,
                       verdict: Verdict, fallbacks: tuple[Fallback, ...]) -> Plan:
    """counters --fallback on a machine without counters: the profile service, said so."""
    fallen = make_plan(dataclasses.replace(request, service="profile"), facts, run_dir, list_counters)
    return dataclasses.replace(
        fallen, service="counters", request=request,
        fallbacks=fallbacks + (Fallback(backend="counters", reason=verdict.reason, fix=verdict.fix or ""),)
        + fallen.fallbacks,
        reason=f"counters unavailable ({verdict.reason}); --fallback ran profile instead: {fallen.reason}")


def _phases(plan: Plan, facts: Facts, main: Backend, extras: list[Backend], run_dir: Path) -> tuple[Phase, ...]:
    """Each phase's commands for this run directory (re-rendered, not re-decided, by `relocate`)."""
    request = dataclasses.replace(plan.request, service=plan.ran_as)
    phases = [_phase(main, request, facts, run_dir, "raw", plan.counter_set)]
    when = "always" if request.torch_pass == "always" else "cheap"  # an extra phase is never the service's point
    phases += [dataclasses.replace(_phase(extra, request, facts, run_dir, f"raw/{extra.name}", None), when=when)
               for extra in extras]
    return tuple(phases)


def sized_steps(plan: Plan, phase: Phase, facts: Facts, done: list[StepResult]) -> SizedRuns | None:
    """The runs the phase's backend adds now that its planned steps measured the workload (profile's
    repeats sized to the workload); None when the plan's steps were all."""
    request = dataclasses.replace(plan.request, service=plan.ran_as)
    job = Job(request=request, facts=facts, raw_dir=Path(plan.run_dir) / phase.raw_dir, counters=plan.counter_set)
    return BACKENDS[phase.backend].sized_steps(job, done)


def cheap_enough(phase: Phase, done: list[StepResult]) -> tuple[bool, str]:
    """Whether a `when: cheap` phase runs after these steps, and the note that says why (or why not)."""
    if phase.when != "cheap":
        return True, ""
    timed = sorted(r.seconds for r in done if r.timed and r.returncode == 0)
    spent = sum(r.seconds for r in done)
    one_run = timed[len(timed) // 2] if timed else spent
    if timed and one_run <= CHEAP_SHARE * spent:
        return True, ""
    return False, (f"no {phase.backend} pass: one more run (~{one_run:.1f} s) would add more than {CHEAP_SHARE * 100:.0f} % "
                   f"to the {spent:.1f} s of timed runs; --torch-pass always runs it")


def _phase(backend: Backend, request: Request, facts: Facts, run_dir: Path, raw: str,
           counters: CounterPlan | None) -> Phase:
    job = Job(request=request, facts=facts, raw_dir=run_dir / raw, counters=counters)
    environment = backend.environment(job)
    steps = backend.steps(job)
    if request.live:
        environment.update(live_marks_env(job, environment, steps))
    environment.update(request.env_overrides)  # the user's word wins
    input_files = {f"{raw}/{name}": text for name, text in backend.counter_inputs(job).items()}
    return Phase(backend=backend.name, raw_dir=raw, steps=steps, environment=environment,
                 input_files=input_files)


def _live_note(request: Request, sampling: SamplingPlan | None) -> str:
    marks = ("each rank's last steps and how far its step ends lag the earliest rank's (the straggler named "
             "from those)") if request.is_python else "no step marks (the workload is not Python)"
    gpus = "GPU busy and power from telemetry.csv" if sampling is not None else "no GPU figures (no sampling)"
    return f"--live: {marks}, {gpus}; about every second on stderr, and one JSON line per update in live.jsonl"


LIVE_MARKS_DIR = "live-steps"  # raw/live-steps/: the step marks of a backend that keeps none itself


def live_marks_env(job: Job, environment: dict[str, str], steps: tuple[Step, ...]) -> dict[str, str]:
    """--live needs each Python rank's step ends (the hook's steps.jsonl): where the backend's hook
    writes no status folder (a GPU tracer without --steps), the hook marks the steps into
    raw/live-steps/ and does nothing else."""
    keys = ("PROFILECTL_TORCH_OUT", "PROFILECTL_STATUS_OUT")
    if not job.launch.python_ranks or any(k in environment or any(k in s.env for s in steps) for k in keys):
        return {}
    marks = {} if "PROFILECTL_RANK_ENV" in environment else step_marks_env(job)
    return {**marks, "PROFILECTL_STATUS_OUT": str(Path(job.raw_dir) / LIVE_MARKS_DIR)}


def relocate(plan: Plan, facts: Facts, run_dir: Path) -> Plan:
    """The same decisions for another run directory (the proposed name was taken meanwhile)."""
    main = BACKENDS[plan.phases[0].backend]
    extras = [BACKENDS[p.backend] for p in plan.phases[1:]]
    moved = dataclasses.replace(plan, run_dir=str(run_dir))
    return dataclasses.replace(moved, phases=_phases(moved, facts, main, extras, run_dir))


def resolve_counters(request: Request, facts: Facts, backend: Backend,
                     list_counters: ListCounters | None) -> tuple[CounterPlan, list[str]]:
    vendor = backend.vendor
    gpu = facts.first_gpu(vendor) if vendor else None
    counter_set = countersets.load(request.counter_set, vendor, gpu.arch if gpu else None)
    if not counter_set.counters:
        raise UsageError(f"counter set {counter_set.name} has no {vendor} counters")
    notes = []
    validated = False
    listing = backend.list_counters(facts, list_counters) if list_counters is not None else None
    if list_counters is None:
        notes.append("counter names not validated (dry run: no cached listing of this GPU and release)")
    elif listing is not None and listing.names:
        where = f"{gpu.name or gpu.arch} ({backend.name})" if gpu else backend.name
        countersets.validate(counter_set.counters, set(listing.names), where, key=backend.counter_key)
        notes.append(f"{len(counter_set.counters)} counters validated against the {len(listing.names)} this GPU "
                     f"lists ({listing.command}, {listing.layout} layout)")
        validated = True
    elif listing is not None and listing.problem:
        notes.append(listing.problem)
    else:
        notes.append(f"counter names not validated: {backend.name} has no counter listing here")
    return CounterPlan(name=counter_set.name, source=counter_set.source, counters=counter_set.counters,
                       passes=backend.counter_passes(counter_set), derived=counter_set.derived,
                       validated=validated), notes


# ------------------------------------------------------------------ env-check's view
def assess(facts: Facts) -> Assessment:
    """What each service would pick on this machine, and each capability's verdict."""
    sample = ("python3", "workload.py")
    services = {}
    for service in SERVICE_ORDER:
        backend, verdict, fallbacks = choose(service, facts, Request(service=service, workload=sample))
        services[service] = ServiceChoice(backend=backend.name if backend else None, reason=verdict.reason,
                                          fallbacks=fallbacks)
    counters = services["counters"]
    capabilities = {
        "tracing": _tracing(facts, services["trace"]),
        "counters": (_counters_available(facts, counters) if counters.backend else
                     _most_relevant(counters.fallbacks, facts)),
        "pc_sampling": _pc_sampling(facts),
        "timing": Verdict(True, "wall-clock timing needs no profiler", backend="timing"),
        "attach": _attach(facts),
        "program_tracing": _program_tracing(facts),
    }
    return Assessment(capabilities=capabilities, services=services)


NON_PYTHON_PROGRAM = ("./cuda_program",)  # env-check's stand-in for a CUDA C++ binary, JAX or Julia program
NSYS_MISSING = ("trace of a non-Python program on NVIDIA needs Nsight Systems (nsys), not found on PATH; "
                "falling back to {backend}")


def _program_tracer_note(request: Request, chosen: Backend, fallbacks: tuple[Fallback, ...]) -> list[str]:
    """Why a trace fell back to timing where Nsight Systems would have traced the program."""
    missing = next((f for f in fallbacks if f.backend == "nsys" and f.cause == "nsys-missing"), None)
    if request.service != "trace" or chosen.name != "timing" or missing is None:
        return []
    return [NSYS_MISSING.format(backend=chosen.name) + (f". Fix: {missing.fix}" if missing.fix else "")]


IMAGE_WITHOUT_TORCH = ("this image has no PyTorch: trace times the script instead, and a PyTorch script stops at "
                       "`import torch`; build on a base that has it: PROFILECTL_BASE_IMAGE=profilectl-base:bookworm-torch "
                       "(CPU; docker/offline-base/build.sh --torch builds it offline) or a ROCm or CUDA PyTorch image")


def _image_note(request: Request, facts: Facts, fallbacks: tuple[Fallback, ...]) -> list[str]:
    """In a container whose Python has no PyTorch, a Python workload's trace cannot use torch.profiler:
    say which image has it, before the run (the compose route builds on $PROFILECTL_BASE_IMAGE)."""
    from profilectl.backends.torch_profiler import TORCH_MISSING
    if not facts.host.in_container or request.service != "trace":
        return []
    return [IMAGE_WITHOUT_TORCH] if any(f.backend == "torch" and f.cause == TORCH_MISSING for f in fallbacks) else []


def _program_tracing(facts: Facts) -> Verdict:
    """Could `trace` follow a program that is not a PyTorch Python process (a CUDA C++ binary, JAX,
    Julia)? rocprofv3 on AMD, Nsight Systems on NVIDIA."""
    request = Request(service="trace", workload=NON_PYTHON_PROGRAM)
    backend, verdict, fallbacks = choose("trace", facts, request)
    if backend is not None and backend.traces_gpu(facts):
        return Verdict(True, verdict.reason, backend=backend.name)
    nsys = next((f for f in fallbacks if f.backend == "nsys"), None)
    if facts.first_gpu("nvidia") is not None and nsys is not None and nsys.cause == "nsys-missing":
        return Verdict(False, NSYS_MISSING.format(backend=backend.name if backend else "nothing"), nsys.fix,
                       backend=backend.name if backend else None, cause=nsys.cause)
    if not facts.gpus:
        return Verdict(False, "no GPU found: a program that is not a PyTorch process (CUDA or HIP C++, JAX) is "
                       "traced by rocprofv3 or Nsight Systems on a GPU; here trace times it", "",
                       backend=backend.name if backend else None)
    return Verdict(False, f"{_most_relevant(fallbacks, facts).reason}; trace falls back to "
                   f"{backend.name if backend else 'nothing'}", backend=backend.name if backend else None)


def _counters_available(facts: Facts, choice: ServiceChoice) -> Verdict:
    """Counters work; the vendor check may still warn (an RDNA GPU outside the stable perf level)."""
    vendor = BACKENDS[choice.backend].vendor if choice.backend else None
    check = facts.checks.get(f"{vendor}_counters")
    if check is not None and check.cause:
        return Verdict(True, check.reason, check.fix, backend=choice.backend, cause=check.cause)
    detail = f": {check.reason}" if check is not None else ""
    return Verdict(True, f"{choice.reason}{detail}", backend=choice.backend)


# What `trace` still records when it cannot trace a GPU, in the words the services table uses
WITHOUT_GPU_TRACE = {"torch": "torch.profiler records the CPU side of a PyTorch script (operators, record_function "
                              "ranges, steps)",
                     "timing": "it times the workload's runs (a wall-clock timeline)"}
# The fix for a missing GPU tracer, by the GPU this machine has: never another vendor's tool
TRACER_FIX = {"amd": "install ROCm's rocprofiler-sdk (rocprofv3), or PyTorch built for ROCm",
              "nvidia": "install Nsight Systems (nsys), or PyTorch built for CUDA"}


def _tracing(facts: Facts, trace: ServiceChoice) -> Verdict:
    """GPU tracing (kernels, copies, a GPU timeline): what the trace service does where it can. Where
    it cannot, the verdict says what `trace` does instead, as the services table does, and the fix
    fits the machine: a tracer for the GPU it has; on a machine without a GPU nothing to install
    (PyTorch, where the workload's Python has none, for the CPU side of PyTorch scripts)."""
    if trace.backend and BACKENDS[trace.backend].traces_gpu(facts):
        return Verdict(True, trace.reason, backend=trace.backend)
    instead = WITHOUT_GPU_TRACE.get(trace.backend or "", f"trace runs {trace.backend}")
    if not facts.gpus:
        python = f" {facts.torch.python}" if facts.torch.python else ""
        fix = "" if facts.torch.version else (f"for the CPU side of PyTorch scripts, install PyTorch for the workload's "
                                              f"Python{python}; Debian's is apt-get install python3-torch")
        return Verdict(False, f"no GPU to trace here; trace still works: {instead}", fix, backend=trace.backend)
    vendor = facts.vendor or ""
    return Verdict(False, f"no GPU tracer found for this {vendor.upper()} GPU; trace still works: {instead}",
                   TRACER_FIX.get(vendor, "install your GPU vendor's tracer"), backend=trace.backend)


def _attach(facts: Facts) -> Verdict:
    """Could `trace --attach PID` work here (the target's own ROCP_TOOL_ATTACH=1 is checked per PID)?"""
    from profilectl.backends.rocprofv3 import supports, tool_facts
    from profilectl.probe.attach import TARGET_ENV
    backend = BACKENDS["rocprofv3"]
    since = tool_facts()["attach"]["since"]
    if facts.first_gpu("amd") is None:
        return Verdict(False, "attaching to a running process needs rocprofv3 on an AMD GPU (Nsight Compute and "
                       "torch.profiler cannot attach)", "start the workload under profilectl instead",
                       cause="attach-unsupported")
    if backend.tool(facts) is None:
        return Verdict(False, "rocprofv3 not found", f"install rocprofiler-sdk from ROCm {since} or later")
    if not supports("--attach", facts):
        return Verdict(False, f"rocprofv3 of ROCm {facts.rocm.version or 'unknown'} cannot attach (from ROCm {since})",
                       f"use ROCm {since} or later", cause="attach-release")
    ptrace = facts.checks.get("attach_ptrace")
    if ptrace is not None and not ptrace.available:
        return Verdict(False, ptrace.reason, ptrace.fix, cause=ptrace.cause)
    why = ptrace.reason if ptrace is not None else "ptrace not checked"
    return Verdict(True, f"rocprofv3 --attach PID ({why}); the target must start with {TARGET_ENV}=1",
                   backend="rocprofv3")


def _pc_sampling(facts: Facts) -> Verdict:
    """PC sampling is what the pc-sampling trace preset would do here."""
    request = Request(service="trace", workload=("python3", "workload.py"), preset="pc-sampling")
    backend = BACKENDS["rocprofv3"]
    verdict = backend.available(facts, request)
    if verdict.available:
        return Verdict(True, verdict.reason, backend=backend.name)
    needs = ("PC sampling needs rocprofv3 (ROCm 6.4+) on an AMD Instinct GPU: host trap on gfx90a, gfx94x, gfx950; "
             "stochastic on gfx94x and gfx950 from ROCm 7.0")
    if facts.first_gpu("amd") is None:  # nothing to install on this machine: say what it needs, fix nothing
        return Verdict(False, f"{verdict.reason}: {needs}", "", cause=verdict.cause)
    return Verdict(False, verdict.reason, verdict.fix or needs, cause=verdict.cause)
