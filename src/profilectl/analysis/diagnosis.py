"""The diagnosis: why the GPU waits, who the straggler is, what failed first, as Findings (verdict,
one sentence, the numbers that carry it, the next step, the scope). Built from the idle-time
breakdown (analysis/idle.py), the stragglers (analysis/stragglers.py), the failures
(analysis/failures.py) and the timeline's launch figures; the rules and thresholds are data
(profiling/verdicts.yaml).

Order of the findings, most actionable first: a failure; a straggler; a run dominated by
compiling; the steady-state verdict (what the idle time of the steady steps is made of); a run
dominated by start-up (after the steady verdict: a one-off cost the steady state does not pay).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from profilectl.analysis import failures as failures_module
from profilectl.analysis import idle as idle_module
from profilectl.analysis import stragglers as stragglers_module
from profilectl.analysis.failures import FailureOrder
from profilectl.analysis.idle import IdleCause, RankIdle, merge_causes, rules
from profilectl.analysis.steps import ProfilerCost
from profilectl.analysis.stragglers import StragglerAnalysis
from profilectl.model.timeline import LaunchStats, RankTimeline, TimelineAnalysis
from profilectl.model.document import Finding

if TYPE_CHECKING:
    from profilectl.model.summary import RankSummary


@dataclass(frozen=True)
class Diagnosis:
    """The diagnosis of a run or job: its findings, most actionable first, and the idle time by cause, straggler and
    failure order behind them."""
    findings: tuple[Finding, ...]
    scope: str  # what the steady-state verdict covers
    ranks: tuple[RankIdle, ...] = ()
    steady: tuple[IdleCause, ...] = ()  # the job's steady-state idle time by cause (ranks added)
    whole: tuple[IdleCause, ...] = ()  # the whole run's
    stragglers: StragglerAnalysis | None = None
    failures: FailureOrder | None = None

    @property
    def verdict(self) -> str:
        return self.findings[0].sentence if self.findings else ""


def _ms(ns: float) -> str:
    from profilectl.model.units import duration_ns
    return duration_ns(ns)


def _causes_line(causes: Sequence[IdleCause], limit: int = 4) -> str:
    return ", ".join(f"{c.title} {_ms(c.idle_ns)} ({100 * c.share:.0f} %, {c.gaps:,} gap(s)"
                     + (f"; {c.activity}" if c.activity else "") + ")" for c in causes[:limit])


def _launch_evidence(launch: LaunchStats | None) -> tuple[bool, str]:
    if launch is None:
        return False, "no launch figures"
    r = rules()
    short = launch.short_kernel_percent >= float(r["launch_short_kernel_percent"])
    shallow = launch.queue_depth_mean is not None and launch.queue_depth_mean < float(r["launch_queue_depth_max"])
    depth = f"{launch.queue_depth_mean:.1f}" if launch.queue_depth_mean is not None else "unknown"
    text = (f"{launch.short_kernel_percent:.0f} % of kernel time in kernels shorter than their launch "
            f"({launch.short_kernel_basis}); launch queue depth {depth} on average")
    return short or shallow, text


@dataclass(frozen=True)
class SteadyFigures:
    """What a steady-state verdict is judged on (docs/definitions.md): one rank's steady windows, or
    a job's ranks averaged (each rank judged on its own clock, then the mean: never a sum over one
    union span). Shares of idle time by cause are of every rank's idle time together."""
    scope: str
    span_ns: int  # the steady windows' length (a job: the ranks' mean)
    idle_ns: int  # (a job: the ranks' mean)
    busy_percent: float  # busy inside the steady windows (a job: the ranks' mean)
    exposed_ns: int  # NCCL/RCCL time with no compute beside it (a job: the ranks' mean)
    exposed_share: float  # of the span (a job: the ranks' mean share)
    copy_ns: int  # copies and memsets (a job: the ranks' mean)
    copy_share: float  # of the busy time (a job: the ranks' mean share)
    causes: tuple[IdleCause, ...]
    ranks: int = 1
    busy_range: tuple[float, float] | None = None  # the lowest and highest rank's busy %, for a job
    exposed_over: int = 0  # ranks whose own exposed share passes the rule
    launch: LaunchStats | None = None
    program: str = ""  # what the trace says the program is (the advice depends on it), "" when unknown or mixed


def figures_of(rank: RankIdle, launch: LaunchStats | None = None) -> SteadyFigures:
    span = rank.steady_span_ns
    busy = rank.steady_busy_ns
    exposed_share = rank.steady_exposed_communication_ns / span if span else 0.0
    return SteadyFigures(scope=rank.scope, span_ns=span, idle_ns=rank.steady_idle_ns,
                         busy_percent=rank.steady_busy_percent, exposed_ns=rank.steady_exposed_communication_ns,
                         exposed_share=exposed_share, copy_ns=rank.steady_copy_ns,
                         copy_share=rank.steady_copy_ns / busy if busy > 0 else 0.0, causes=rank.steady,
                         exposed_over=int(exposed_share >= float(rules()["exposed_communication_share"])),
                         launch=launch, program=rank.program)


def job_figures(ranks: Sequence[RankIdle], launch: LaunchStats | None = None) -> SteadyFigures:
    """The ranks' steady figures averaged, each rank's on its own windows."""
    own = [figures_of(r) for r in ranks if r.steady_span_ns]
    count = len(own) or 1
    scopes = {r.scope for r in ranks}
    scope = (next(iter(scopes)) if len(scopes) == 1 else "steady steps of each rank") + f", mean of {len(own)} ranks"
    busy = [f.busy_percent for f in own]
    return SteadyFigures(
        scope=scope, span_ns=sum(f.span_ns for f in own) // count, idle_ns=sum(f.idle_ns for f in own) // count,
        busy_percent=sum(busy) / count, exposed_ns=sum(f.exposed_ns for f in own) // count,
        exposed_share=sum(f.exposed_share for f in own) / count, copy_ns=sum(f.copy_ns for f in own) // count,
        copy_share=sum(f.copy_share for f in own) / count, causes=merge_causes([r.steady for r in ranks]),
        ranks=len(own), busy_range=(min(busy), max(busy)) if busy else None,
        exposed_over=sum(f.exposed_over for f in own), launch=launch,
        program=programs.pop() if len(programs := {r.program for r in ranks}) == 1 else "")


def steady_finding(figures: SteadyFigures, subject: str = "", copies: Sequence[tuple[str, float]] = ()) -> Finding:
    """The verdict of one scope (a rank's steady state, or the job's) from its steady figures; the
    rules in order: exposed communication, data movement, a busy GPU, then the idle time's causes."""
    r = rules()
    f = figures
    busy_percent = f.busy_percent
    who = f"{subject}: " if subject else ""
    if f.ranks > 1 and f.busy_range is not None:
        base = [f"{f.scope}: GPU busy {busy_percent:.0f} % on average (ranks {f.busy_range[0]:.0f}-"
                f"{f.busy_range[1]:.0f} %); idle {_ms(f.idle_ns)} of {_ms(f.span_ns)} per rank"]
    else:
        base = [f"{f.scope}: GPU idle {_ms(f.idle_ns)} of {_ms(f.span_ns)} ({100 - busy_percent:.0f} %; busy "
                f"{busy_percent:.0f} %)"]
    if f.causes:
        base.append("idle time by cause: " + _causes_line(f.causes))
    if f.exposed_ns:
        base.append(f"exposed communication (NCCL/RCCL with no compute beside it): {_ms(f.exposed_ns)}, "
                    f"{100 * f.exposed_share:.0f} % of the steady span" + (f" on average; {f.exposed_over} of {f.ranks} "
                                                                           "ranks over the rule" if f.ranks > 1 else ""))
    if f.copy_ns:
        base.append(f"copies and memsets: {_ms(f.copy_ns)}, {100 * f.copy_share:.0f} % of the GPU's busy time"
                    + (" on average" if f.ranks > 1 else ""))
    if f.exposed_share >= float(r["exposed_communication_share"]):
        rule = r.cause("communication")
        mean = " on average over the ranks" if f.ranks > 1 else ""
        return Finding(verdict="communication-bound", scope=f.scope, next_step=rule.next_step,
                       sentence=f"{who}communication-bound: NCCL/RCCL collectives not hidden under compute take "
                                f"{100 * f.exposed_share:.0f} % of the steady state{mean} ({_ms(f.exposed_ns)})",
                       evidence=tuple(base))
    if f.copy_share >= float(r["copy_dominant_share"]) and busy_percent >= float(r["copy_busy_min_percent"]):
        if copies:
            base.append("largest copies: " + ", ".join(f"{name} {_ms(ns)}" for name, ns in copies[:3]))
        return Finding(verdict="data-movement-bound", scope=f.scope, evidence=tuple(base),
                       sentence=f"{who}data-movement-bound: copies and memsets take {100 * f.copy_share:.0f} % of the "
                                f"GPU's busy time in the steady state ({_ms(f.copy_ns)}); the GPU is busy "
                                f"{busy_percent:.0f} % of it",
                       next_step="Move less data: keep tensors on the GPU across steps, copy from pinned memory with "
                                 "non_blocking=True so copies overlap compute, batch small copies (see the copies "
                                 "table for each copy's direction).")
    if busy_percent >= float(r["busy_ok_percent"]) or not f.causes:
        return Finding(verdict="gpu-bound", scope=f.scope, evidence=tuple(base),
                       sentence=f"{who}the GPU is busy {busy_percent:.0f} % of the steady state"
                                f"{' on average over the ranks' if f.ranks > 1 else ''}: the time is in the kernels, "
                                "not in waiting",
                       next_step="Look at the top kernels (counters service: which roof each one is under).")
    causes = f.causes
    launch_ok, launch_text = _launch_evidence(f.launch)
    ranked = [c for c in causes if c.cause != "launch" or launch_ok]
    top = ranked[0] if ranked else causes[0]
    if top.cause == "launch" or (causes[0].cause == "launch" and not launch_ok):
        base.append(f"launches: {launch_text}")
    idle_part = f"the GPU is idle {100 - busy_percent:.0f} % of the steady state" + \
        (" on average over the ranks" if f.ranks > 1 else "")
    if top.share < float(r["dominant_share"]):
        listed = ", ".join(f"{c.title} {100 * c.share:.0f} %" for c in causes[:3])
        return Finding(verdict="host-bound", scope=f.scope, evidence=tuple(base),
                       sentence=f"{who}host-bound, no single cause: {idle_part}, spread over {listed}",
                       next_step=r.cause(top.cause).next_step_for(f.program))
    rule = r.cause(top.cause)
    share = f"{100 * top.share:.0f} % of the GPU's idle time"
    named = f" ({top.activity})" if top.activity else ""
    sentences = {
        "launch": f"launch-bound: {idle_part}, {share} in gaps shorter than "
                  f"{int(r['launch_gap_max_ns']) // 1000} µs between kernels shorter than their launches",
        "synchronisation": f"synchronisation-bound: {idle_part}; {share} follows a synchronisation{named} "
                           "that made the host wait for the GPU",
        "communication": f"communication-bound: {idle_part}; {share} is spent in collectives on the host{named}",
        "input": f"input-bound: {idle_part}; {share} is spent waiting for the next batch{named}",
        "compile": f"compile-dominated: {share} is torch.compile at work{named}",
        "copy": f"synchronisation-bound: {idle_part}; {share} is in synchronous copies{named}",
        "turns": f"synchronisation-bound: {idle_part}; {share} is in short holes the host spends in blocking "
                 f"runtime calls{named}: the host and the GPU take turns",
        "startup": f"start-up dominated: {idle_part}; {share} is one-off start-up work in runtime calls of a "
                   f"millisecond or more{named} (code object loading, context creation)",
        "allocation": f"host-bound by allocations: {idle_part}; {share} is in device allocations{named}",
        "checkpoint": f"host-bound by checkpointing: {idle_part}; {share} is spent saving state{named}",
        "evaluation": f"host-bound by evaluation: {idle_part}; {share} is an evaluation phase{named}",
        "host": f"host-bound by {top.activity or 'CPU operators'}: {idle_part}; {share} is host work in operators, "
                f"{top.activity or 'unnamed'} the largest",
        "untraced": f"host-bound, cause not in the trace: {idle_part}; {share} is in gaps longer than a launch, "
                    "and none of the files read records host activity to say what the host did",
        "unrecorded": f"host-bound by host work the trace does not record (code between its recorded calls): "
                      f"{idle_part}; {share} has no recorded host event across it",
    }
    return Finding(verdict=rule.verdict, scope=f.scope, evidence=tuple(base), next_step=rule.next_step_for(f.program),
                   sentence=who + sentences.get(top.cause, f"{rule.verdict}: {share} is {rule.title}"))


def _phase_findings(ranks: Sequence[RankIdle], whole: Sequence[IdleCause]) -> tuple[Finding | None, Finding | None]:
    r = rules()
    total = sum(c.idle_ns for c in whole)
    if not total:
        return None, None
    compile_ = next((c for c in whole if c.cause == "compile"), None)
    compile_finding = None
    if compile_ is not None and compile_.share >= float(r["phase_dominant_share"]):
        compile_finding = Finding(
            verdict="compile-dominated", scope="whole run",
            sentence=f"compile-dominated: torch.compile holds {100 * compile_.share:.0f} % of the run's GPU idle time "
                     f"({_ms(compile_.idle_ns)} of {_ms(total)}); judge the steady state apart",
            evidence=(f"whole run: idle time by cause: {_causes_line(whole)}",
                      f"largest compile activity: {compile_.activity or '-'}"),
            next_step=r.cause("compile").next_step)
    phases: dict[str, int] = {}
    for rank in ranks:
        for name, ns in rank.phases:
            phases[name] = phases.get(name, 0) + ns
    startup = phases.get("startup", 0) + phases.get("warmup", 0)
    startup_finding = None
    if startup / total >= float(r["phase_dominant_share"]) and compile_finding is None:
        startup_finding = Finding(
            verdict="startup-dominated", scope="whole run",
            sentence=f"start-up dominated: {100 * startup / total:.0f} % of the run's GPU idle time is before the "
                     f"steady state ({_ms(startup)} of {_ms(total)}: start-up and warm-up steps)",
            evidence=("idle time by phase: " + ", ".join(f"{k} {_ms(v)}" for k, v in phases.items()),),
            next_step="Profile more steady steps (a longer run, or --steps after the warm-up) so that the one-off "
                      "start-up does not hide the loop's own behaviour.")
    return compile_finding, startup_finding


def _profiler_finding(cost: ProfilerCost | None) -> Finding | None:
    """The profiler's own cost per step, when it is large enough to colour the figures."""
    if cost is None or cost.percent < float(rules()["profiler_overhead_percent"]):
        return None
    return Finding(
        verdict="profiler-overhead", scope=f"{cost.profiled_steps} profiled against {cost.unprofiled_steps} other steps",
        sentence=f"the profiler adds {_ms(cost.added_ns)} per step (+{cost.percent:.0f} %): the steps it recorded took "
                 f"{_ms(cost.profiled_ns)} (median), the run's other steps {_ms(cost.unprofiled_ns)}; host-side "
                 "figures of the profiled steps are inflated by it",
        evidence=(f"profiled steps: median {_ms(cost.profiled_ns)} over {cost.profiled_steps} rank-steps; unprofiled "
                  f"(after the warm-up, away from the window's edges): median {_ms(cost.unprofiled_ns)} over "
                  f"{cost.unprofiled_steps}",),
        next_step="Record less (trace --preset lightweight, fewer steps with --steps, no with_stack/record_shapes) "
                  "and confirm a host-bound verdict or a straggler with `profilectl profile` (no profiler).")


def _straggler_finding(found: StragglerAnalysis, cost: ProfilerCost | None = None) -> Finding | None:
    s = found.straggler
    if s is None:
        return None
    margin = float(rules()["straggler_profiler_margin"])
    if cost is not None and cost.added_ns > 0 and s.lead_ns <= margin * cost.added_ns:
        return None  # within what the profiler adds: said by why_none (see diagnose_reduced)
    label = f"rank {s.rank}" + (f" ({s.host})" if s.host else "")
    if found.unit == "collective":  # the trace marks no steps: each collective call is judged
        return Finding(verdict="straggler", scope=f"{s.steps} collective calls",
                       sentence=f"{label} is the straggler: the other ranks wait for it {_ms(s.lead_ns)} per collective "
                                f"call (the trace marks no steps: each of its {s.steps} collective calls is judged)",
                       evidence=(f"it was the rank waited for in {s.steps_led} of {s.steps} collective calls (noise "
                                 f"floor {_ms(found.noise_ns)}; waits measured as {s.basis})",),
                       next_step=f"Find what {label} does before each collective that the others do not; mark the "
                                 "loop's steps (torch.profiler's schedule, ROCTx/NVTX ranges) to see its steps.")
    per_rank: dict[str, list[int]] = {}
    own: dict[str, list[int]] = {}
    for row in found.steps:
        per_rank.setdefault(row.rank, []).append(row.collective_ns)
        own.setdefault(row.rank, []).append(row.own_ns)
    import statistics
    evidence = [f"rank {rank}: median per steady step {_ms(statistics.median(waits))} in collectives, "
                f"{_ms(statistics.median(own[rank]))} of its own" for rank, waits in per_rank.items()]
    skews = [row.end_skew_ns for row in found.steps if row.rank == s.rank and row.end_skew_ns is not None]
    if skews:
        evidence.append(f"{label}'s steps end {_ms(statistics.median(skews))} after the earliest rank's (median)")
    evidence.append(f"it was the rank waited for in {s.steps_led} of {s.steps} steady steps (noise floor "
                    f"{_ms(found.noise_ns)} per step; waits measured as {s.basis})")
    if s.steps < 3:
        evidence.append(f"a weak claim: {s.steps} steady step(s) only; profile more steps (--steps) to confirm it")
    return Finding(verdict="straggler", scope=f"{s.steps} steady steps",
                   sentence=f"{label} is the straggler: the other ranks wait for it {_ms(s.lead_ns)} per step in "
                            f"collectives (its own work per step is {s.percent:.1f} % longer than the fastest rank's, "
                            f"{_ms(s.fastest_own_ns)})",
                   evidence=tuple(evidence),
                   next_step=f"Find what {label} does that the others do not (its host work, data, or GPU): "
                             "compare its steps with the fastest rank's in the trace.")


def _failure_finding(found: FailureOrder) -> Finding:
    first = found.first
    return Finding(verdict="failure", scope="job", sentence=failures_module.sentence(found),
                   evidence=tuple(f"rank {f.rank}: {f.how}" + (f" {f.after_first_ns / 1e9:.3f} s after the first" if
                                                                f.after_first_ns else "") + f": {f.error}"
                                  for f in (first, *found.later, *found.stopped))
                   + ("from the ranks' status files: a rank that died without unwinding (os._exit, a fatal signal, "
                      "a crash) writes none and is not in this order; the run's message adds the launcher's report",),
                   next_step=f"Read rank {first.rank}'s error first: the other ranks failed or were stopped after it.")


def diagnose(parts: Sequence[RankTimeline], timeline: TimelineAnalysis | None,
             ranks: Sequence["RankSummary"] = (), copies: Sequence[tuple[str, float]] = (),
             profiler_cost: ProfilerCost | None = None) -> Diagnosis | None:
    idle = idle_module.analyse(parts) if parts else ()
    stragglers = stragglers_module.analyse(parts, idle) if len(idle) > 1 else None
    return diagnose_reduced(idle, stragglers, timeline, ranks, copies, profiler_cost)


def diagnose_reduced(idle: Sequence[RankIdle], stragglers: StragglerAnalysis | None, timeline: TimelineAnalysis | None,
                     ranks: Sequence["RankSummary"] = (), copies: Sequence[tuple[str, float]] = (),
                     profiler_cost: ProfilerCost | None = None) -> Diagnosis | None:
    """The diagnosis from each rank's idle breakdown and the straggler judged from their waits
    (what a job's partials keep; read/partials.py), in rank order. `copies`: the largest copies by
    name and GPU time, the evidence of a data-movement verdict."""
    idle = tuple(idle)
    failure = failures_module.order(ranks) if len(ranks) > 1 else None
    if not idle:
        if failure is None:
            return None
        return Diagnosis(findings=(_failure_finding(failure),), scope="job", failures=failure)
    steady = merge_causes([r.steady for r in idle])
    whole = merge_causes([r.whole for r in idle])
    launch = timeline.merged.launch if timeline is not None else None
    rank_launch = {(row.rank, row.host): row.launch for row in timeline.ranks} if timeline is not None else {}
    job = job_figures(idle, launch) if len(idle) > 1 else figures_of(idle[0], launch)
    scope = job.scope
    findings: list[Finding] = []
    if failure is not None:
        findings.append(_failure_finding(failure))
    if (overhead := _profiler_finding(profiler_cost)) is not None:
        findings.append(overhead)
    if stragglers is not None and (found := _straggler_finding(stragglers, profiler_cost)) is not None:
        findings.append(found)
    elif stragglers is not None and stragglers.straggler is not None and profiler_cost is not None:
        s = stragglers.straggler
        stragglers = dataclasses.replace(stragglers, straggler=None, why_none=(
            f"rank {s.rank} is waited for {_ms(s.lead_ns)} per step, no more than "
            f"{float(rules()['straggler_profiler_margin']):g} times what the profiler adds per step "
            f"({_ms(profiler_cost.added_ns)}): under the profiler its host work ran slower than the others', which "
            "may be the profiler's doing, not the job's; confirm with `profilectl profile` (no profiler)"))
    compile_finding, startup_finding = _phase_findings(idle, whole)
    if compile_finding is not None:
        findings.append(compile_finding)
    if job.span_ns:
        findings.append(steady_finding(job, copies=copies))
    if startup_finding is not None:
        findings.append(startup_finding)
    if len(idle) > 1:  # each rank's own verdict, by the same rules on its own figures
        for rank in idle:
            if rank.steady_span_ns:
                finding = steady_finding(figures_of(rank, rank_launch.get((rank.rank, rank.host))),
                                         subject=f"rank {rank.rank}", copies=copies)
                findings.append(dataclasses.replace(finding, scope=f"rank {rank.rank}, {rank.scope}"))
    return Diagnosis(findings=tuple(findings), scope=scope, ranks=idle, steady=steady, whole=whole,
                     stragglers=stragglers, failures=failure)
