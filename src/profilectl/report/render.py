"""Rich rendering of env-check, plans and run results. Data in, text out: no decisions here."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from profilectl.report import units
from profilectl.screen import assemble, text
from profilectl.report.summary import Summary

if TYPE_CHECKING:  # annotations only: `report` and `ls` need not import the planner
    from profilectl.envreport import EnvReport
    from profilectl.manifest import Manifest
    from profilectl.plan import Plan
    from profilectl.report.compare import Comparison
    from profilectl.report.listing import ListedRun


def _bytes(n: int | None) -> str:
    if not n:
        return "-"
    return f"{n / 2**30:.0f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _ns(value: float | None) -> str:
    return units.duration_ns(value, missing="-")


def _mark(ok: bool) -> Text:
    return text("yes", "green") if ok else text("no", "red")


def _short(name: str, width: int = 80) -> str:
    return units.shorten(name, width)


def env_report(console: Console, report: EnvReport) -> None:
    facts, assessment = report.facts, report.assessment
    host = facts.host
    where = f"container ({host.container_evidence})" if host.in_container else "host"
    caps = ", ".join(c for c in host.effective_capabilities if c in ("SYS_ADMIN", "PERFMON", "SYS_PTRACE"))
    console.print(assemble(("profilectl env-check", "bold"),
                           f"  {host.hostname} · {where} · uid {host.uid} · "
                           f"caps: {caps or 'none of SYS_ADMIN/PERFMON/SYS_PTRACE'}"
                           f" · perf_event_paranoid {host.perf_event_paranoid if host.perf_event_paranoid is not None else '?'}"
                           f" · probed in {facts.probe_seconds:.2f} s"))
    gpus = Table(title="GPUs", title_justify="left")
    for column in ("#", "vendor", "arch", "family", "name", "memory", "source"):
        gpus.add_column(column)
    for g in facts.gpus:
        gpus.add_row(str(g.index), g.vendor, g.arch or "?", g.family or "-", g.name or "-", _bytes(g.memory_bytes), g.source)
    if not facts.gpus:
        gpus.add_row("-", "-", "-", "-", text("no GPU found", "yellow"), "-", "-")
    console.print(gpus)

    torch = facts.torch
    tools = Table(title=f"ROCm {facts.rocm.version or '-'} ({facts.rocm.root or 'not found'}) · PyTorch "
                        f"{torch.version or 'not found'}{' (' + torch.backend + ')' if torch.backend else ''}",
                  title_justify="left")
    for column in ("tool", "version", "path"):
        tools.add_column(column)
    for tool in facts.tools.values():
        tools.add_row(tool.name, tool.version or "-", tool.path)
    if not facts.tools:
        tools.add_row(text("no profiler found", "yellow"), "-", "-")
    console.print(tools)

    capabilities = Table(title="Capabilities", title_justify="left")
    for column in ("capability", "available", "backend", "reason", "fix"):
        capabilities.add_column(column, overflow="fold")
    for name, verdict in assessment.capabilities.items():
        capabilities.add_row(name, _mark(verdict.available), verdict.backend or "-", verdict.reason, verdict.fix or "")
    console.print(capabilities)

    services = Table(title="Services", title_justify="left")
    for column in ("service", "backend", "why", "fell back from"):
        services.add_column(column, overflow="fold")
    for name, choice in assessment.services.items():
        fell = "; ".join(f"{f.backend}: {f.reason}" for f in choice.fallbacks)
        services.add_row(name, choice.backend or text("none", "red"), choice.reason, fell)
    console.print(services)
    for note in facts.notes:
        console.print(assemble(("note:", "yellow"), f" {note}"))


def plan(console: Console, planned: Plan) -> None:
    console.print(assemble(("plan", "bold"), f" {planned.service} → backend ", (planned.backend, "bold"),
                           f": {planned.reason}"))
    for fallback in planned.fallbacks:
        console.print(f"  fell back from {fallback.backend}: {fallback.reason}", markup=False)
    console.print(f"  run directory: {planned.run_dir} (not created: dry run)", markup=False)
    for phase in planned.phases:
        env = " ".join(f"{k}={v}" for k, v in phase.environment.items())
        console.print(assemble("  ", (phase.backend, "bold"), f" writes {phase.raw_dir}/  env: {env or '-'}"))
        for path, text in phase.input_files.items():
            console.print(f"    {path}:", markup=False)
            for line in text.splitlines():
                console.print(f"      {line}", markup=False, highlight=False)
        shown = phase.steps if len(phase.steps) <= 3 else phase.steps[:1]
        for step in shown:
            step_env = "".join(f"{k}={v} " for k, v in step.env.items())
            console.print(f"    $ {step_env}{shlex.join(step.argv)}", markup=False, highlight=False)
        if len(phase.steps) > len(shown):
            varies = f"; {', '.join(sorted({k for s in phase.steps for k in s.env}))} per run" \
                if any(s.env for s in phase.steps) else ""
            console.print(f"    … the same command {len(phase.steps)} times in all "
                          f"({sum(1 for s in phase.steps if s.warmup)} warm-up{varies})")
    for note in planned.notes:
        console.print(f"  note: {note}", markup=False)


def report(console: Console, summary: Summary, top: int = 10, header: bool = True) -> None:
    """Every section of the summary's document, as rich tables and lines; empty sections are left out.
    Without `header`, the title, metadata and the run's story are left to the caller's closing line."""
    from profilectl.report.renderers import terminal
    from profilectl.report.sections import build_document
    terminal.render(console, build_document(summary), top, header=header, skip=() if header else ("run",))


def outcome(console: Console, manifest: Manifest, summary: Summary, run_dir: str, brief: str = "") -> None:
    """A finished run: its tables, then one line naming it. `brief` (a rank of a SLURM job other
    than rank 0: "rank 3 on node2: ") prints that line alone, so a job's log is not N reports."""
    if not brief:
        report(console, summary, header=False)  # the closing line names the run
    colour = "green" if manifest.status == "ok" else "red"
    console.print(assemble(brief, (manifest.status, colour), f" {manifest.service} via {manifest.backend} "
                           f"in {manifest.wall_seconds or 0:.2f} s → {run_dir}"))
    if summary.perfetto_trace and not brief:
        console.print(f"  Perfetto trace: {run_dir}/{summary.perfetto_trace} (open in ui.perfetto.dev)",
                      highlight=False)


def runs_table(console: Console, listed: list[ListedRun], root: str) -> None:
    table = Table(title=f"Runs in {root} (newest first)", title_justify="left")
    for column in ("when (UTC)", "service", "backend", "status", "wall", "workload", "run"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "running": "yellow"}
    for run in listed:
        colour = colours.get(run.status, "red")
        wall = f"{run.wall_seconds:.2f} s" if run.wall_seconds is not None else "-"
        status = text(run.status, colour)
        table.add_row(text(run.started_at.replace("T", " ")[:19] or "-"), text(run.service), text(run.backend), status,
                      wall, text(_short(run.workload, 50) if not run.problem else _short(run.problem, 80)), text(run.run))
    if not listed:
        table.add_row("-", "-", "-", "no runs yet", "-", "-", "-")
    console.print(table)


def _matched_table(what: str, rows: Sequence[Any], top: int) -> Table:
    """Names found in both runs (kernels, or operators of CPU-only traces), largest change first."""
    table = Table(title=f"{what.capitalize()}s in both (largest change first)", title_justify="left")
    table.add_column(what, overflow="fold", min_width=24, ratio=1)
    for column in ("calls A", "calls B", "total A", "total B", "speedup"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows[:top]:
        table.add_row(text(_short(row.name)), f"{row.calls_a:,}", f"{row.calls_b:,}", _ns(row.total_ns_a),
                      _ns(row.total_ns_b), units.speedup(row.speedup))
    return table


def comparison(console: Console, result: Comparison, top: int = 15) -> None:
    from profilectl.report.export import gate_line
    if result.gate:
        colour = {"pass": "green", "fail": "red"}.get(result.gate.verdict, "bold")
        console.print(gate_line(result.gate), style=colour, markup=False, highlight=False, soft_wrap=True)
        for note in result.gate.notes:
            console.print(f"  {note}", markup=False, highlight=False)
    console.print(assemble(("A", "bold"), f" {result.a}"))
    console.print(assemble(("B", "bold"), f" {result.b}"))
    if result.warning:
        console.print(f"warning: {result.warning}", style="yellow", markup=False, highlight=False)
    if result.timing:
        timing = Table(title=f"Timing ({result.timing_runs_a} runs in A, {result.timing_runs_b} in B)",
                       title_justify="left")
        for column in ("statistic", "A", "B", "speedup"):
            timing.add_column(column, justify="left" if column == "statistic" else "right")
        for stat in result.timing:
            timing.add_row(stat.stat, units.duration_s(stat.a_s), units.duration_s(stat.b_s),
                           units.speedup(stat.speedup))
        console.print(timing)
    if result.kernels or result.only_in_a or result.only_in_b:  # timing runs alone have no kernels to list
        console.print(f"GPU time {_ns(result.gpu_time_ns_a)} → {_ns(result.gpu_time_ns_b)} "
                      f"(speedup {units.speedup(result.speedup)}); {len(result.kernels)} kernels in both, "
                      f"{len(result.only_in_a)} only in A, {len(result.only_in_b)} only in B")
        console.print(_matched_table("kernel", result.kernels, top))
    elif not result.timing:  # no kernels, no timed runs: CPU-only traces compare by their operators
        from profilectl.report.compare import nothing_line, operators_line
        if result.operators:
            console.print(operators_line(result), markup=False, highlight=False)
            console.print(_matched_table("operator", result.operators, top))
        else:
            console.print(nothing_line(), markup=False, highlight=False)
    if result.ranks:
        per_rank = Table(title="Per rank", title_justify="left")
        for column in ("rank", "GPU time A", "GPU time B", "speedup"):
            per_rank.add_column(column, justify="left" if column == "rank" else "right")
        for delta in result.ranks:
            per_rank.add_row(text(delta.rank), _ns(delta.total_ns_a), _ns(delta.total_ns_b), units.speedup(delta.speedup))
        console.print(per_rank)
    for label, only_rows in (("Only in A", result.only_in_a), ("Only in B", result.only_in_b)):
        if only_rows:
            only = Table(title=label, title_justify="left")
            only.add_column("kernel", overflow="fold")
            only.add_column("calls", justify="right")
            only.add_column("total", justify="right")
            for item in only_rows[:top]:
                only.add_row(text(_short(item.name)), f"{item.calls:,}", _ns(item.total_ns))
            console.print(only)
