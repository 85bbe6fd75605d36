"""Rich rendering of env-check, plans and run results. Data in, text out: no decisions here."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Console
from rich.table import Table

from profilectl.probe.report import EnvReport


def _bytes(n: int | None) -> str:
    if not n:
        return "-"
    return f"{n / 2**30:.0f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _ns(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3f} {unit}"
    return f"{value:.0f} ns"


def _mark(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


def env_report(console: Console, env: EnvReport) -> None:
    host = env.host
    where = f"container ({host.container_evidence})" if host.in_container else "host"
    console.print(f"[bold]profilectl env-check[/]  {host.hostname} · {where} · uid {host.uid} · "
                  f"caps: {', '.join(c for c in host.effective_capabilities if c in ('SYS_ADMIN', 'PERFMON', 'SYS_PTRACE')) or 'none of SYS_ADMIN/PERFMON/SYS_PTRACE'}"
                  f" · perf_event_paranoid {host.perf_event_paranoid if host.perf_event_paranoid is not None else '?'}"
                  f" · probed in {env.probe_seconds:.2f} s")
    gpus = Table(title="GPUs", title_justify="left")
    for column in ("#", "vendor", "arch", "family", "name", "memory", "source"):
        gpus.add_column(column)
    for g in env.gpus:
        gpus.add_row(str(g.index), g.vendor, g.arch or "?", g.family or "-", g.name or "-", _bytes(g.memory_bytes), g.source)
    if not env.gpus:
        gpus.add_row("-", "-", "-", "-", "[yellow]no GPU found[/]", "-", "-")
    console.print(gpus)

    tools = Table(title=f"ROCm {env.rocm.version or '-'} ({env.rocm.root or 'not found'}) · PyTorch "
                        f"{env.torch.version or 'not found'}{' (' + env.torch.backend + ')' if env.torch.backend else ''}",
                  title_justify="left")
    tools.add_column("tool")
    tools.add_column("version")
    tools.add_column("path")
    for tool in env.tools.values():
        tools.add_row(tool.name, tool.version or "-", tool.path)
    if not env.tools:
        tools.add_row("[yellow]no profiler found[/]", "-", "-")
    console.print(tools)

    caps = Table(title="Capabilities", title_justify="left")
    for column in ("capability", "available", "backend", "reason", "fix"):
        caps.add_column(column, overflow="fold")
    for name, verdict in env.capabilities.items():
        caps.add_row(name, _mark(verdict.available), verdict.backend or "-", verdict.reason, verdict.fix or "")
    console.print(caps)

    services = Table(title="Services", title_justify="left")
    for column in ("service", "backend", "why", "fell back from"):
        services.add_column(column, overflow="fold")
    for name, choice in env.services.items():
        fell = "; ".join(f"{f['backend']}: {f['reason']}" for f in choice.fallbacks)
        services.add_row(name, choice.backend or "[red]none[/]", choice.reason, fell)
    console.print(services)
    for note in env.notes:
        console.print(f"[yellow]note:[/] {note}")


def plan(console: Console, plan_dict: dict[str, Any]) -> None:
    console.print(f"[bold]plan[/] {plan_dict['service']} → backend [bold]{plan_dict['backend']}[/]: {plan_dict['reason']}")
    for fallback in plan_dict["fallbacks"]:
        console.print(f"  fell back from {fallback['backend']}: {fallback['reason']}")
    console.print(f"  run directory: {plan_dict['run_dir']} (not created: dry run)")
    for phase in plan_dict["phases"]:
        env = " ".join(f"{k}={v}" for k, v in phase["environment"].items())
        console.print(f"  [bold]{phase['backend']}[/] writes {phase['raw_dir']}/  env: {env or '-'}")
        for path, text in phase["input_files"].items():
            console.print(f"    {path}:")
            for line in text.splitlines():
                console.print(f"      {line}", markup=False, highlight=False)
        shown = phase["steps"] if len(phase["steps"]) <= 3 else phase["steps"][:1]
        for step in shown:
            console.print(f"    $ {shlex.join(step['argv'])}", markup=False, highlight=False)
        if len(phase["steps"]) > len(shown):
            console.print(f"    … the same command {len(phase['steps'])} times in all "
                          f"({sum(1 for s in phase['steps'] if s['warmup'])} warm-up)")
    for note in plan_dict["notes"]:
        if note:
            console.print(f"  note: {note}")


WIDE_TERMINAL = 120  # below this, min/max/std are left out so kernel names stay readable


def kernels_table(rows: list[dict], title: str, limit: int = 10, width: int = WIDE_TERMINAL) -> Table:
    shown = f" (top {limit} of {len(rows)})" if len(rows) > limit else ""
    table = Table(title=title + shown, title_justify="left")
    table.add_column("name", overflow="fold", min_width=24, ratio=1)
    wide = width >= WIDE_TERMINAL
    columns = [("calls", lambda r: f"{r['calls']:,}"), ("total", lambda r: _ns(r.get("total_ns"))),
               ("mean", lambda r: _ns(r.get("mean_ns")))]
    if wide:
        columns += [("min", lambda r: _ns(r.get("min_ns"))), ("max", lambda r: _ns(r.get("max_ns"))),
                    ("std", lambda r: _ns(r.get("std_ns")))]
    columns.append(("% time", lambda r: f"{r['percent']:.1f}" if r.get("percent") is not None else "-"))
    for name, _ in columns:
        table.add_column(name, justify="right", no_wrap=True)
    for row in rows[:limit]:
        table.add_row(_short(row["name"]), *[cell(row) for _, cell in columns])
    return table


def counters_table(rows: list[dict], limit: int = 10) -> Table:
    columns = list(dict.fromkeys(k for row in rows for k in row if k != "kernel"))
    table = Table(title="Counters per kernel" + (f" (top {limit} of {len(rows)})" if len(rows) > limit else ""),
                  title_justify="left")
    table.add_column("kernel", overflow="fold", min_width=24, ratio=1)
    for column in columns:
        table.add_column(column, justify="right", overflow="fold", max_width=18)
    for row in rows[:limit]:
        table.add_row(_short(row["kernel"]), *[_num(row.get(c)) for c in columns])
    return table


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 or value == int(value) else f"{value:.3g}"
    return str(value)


def _short(name: str, width: int = 80) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def report(console: Console, summary: dict[str, Any], top: int = 10) -> None:
    """Every section the summary has, as rich tables; empty sections are left out."""
    run = summary.get("run")
    if run:
        console.print(f"[bold]{run['service']}[/] via [bold]{run['backend']}[/] — {run['status']}"
                      f"{' (' + str(run['wall_seconds']) + ' s)' if run.get('wall_seconds') is not None else ''}: {run['reason']}")
        for fallback in run.get("fallbacks") or []:
            console.print(f"  fell back from {fallback['backend']}: {fallback['reason']}")
        if run.get("status") not in ("ok", None):
            console.print(f"  [red]{run.get('message')}[/]")
    elif summary.get("source"):
        source = summary["source"]
        console.print(f"[bold]{source.get('kind', '?')}[/] {source.get('path', '')}"
                      f"{' (cached summary)' if summary.get('cache_hit') else ''}")
    totals = summary.get("totals") or {}
    if totals.get("dispatches"):
        console.print(f"  {totals['dispatches']:,} dispatches of {totals['kernels']:,} kernels, "
                      f"{_ns(totals['gpu_time_ns'])} of GPU time")
    timing = summary.get("timing")
    if timing:
        table = Table(title=f"Timing ({timing['runs']} runs)", title_justify="left")
        for column in ("mean", "median", "p95", "min", "max", "std"):
            table.add_column(column, justify="right")
        table.add_row(*[f"{timing[k + '_s']:.4f} s" for k in ("mean", "median", "p95", "min", "max", "std")])
        console.print(table)
    sections = (("kernels", "Top kernels"), ("api", "API calls"), ("memory_copies", "Memory copies"),
                ("operators", "Operators (CPU)"))
    for key, title in sections:
        if summary.get(key):
            console.print(kernels_table(summary[key], title, top, console.width))
    if summary.get("counters_by_kernel"):
        console.print(counters_table(summary["counters_by_kernel"], top))
    if summary.get("ranks"):
        table = Table(title="Per rank (process)", title_justify="left")
        for column in ("rank", "kernels", "dispatches", "GPU time"):
            table.add_column(column, justify="left" if column == "rank" else "right")
        for row in summary["ranks"]:
            table.add_row(row["rank"], str(row["kernels"]), f"{row['dispatches']:,}", _ns(row["total_ns"]))
        console.print(table)
    for note in summary.get("notes") or []:
        console.print(f"[yellow]note:[/] {note}")


def outcome(console: Console, manifest: dict[str, Any], summary: dict[str, Any], run_dir: str) -> None:
    report(console, {**summary, "run": None, "source": None})  # the closing line names the run
    colour = "green" if manifest["status"] == "ok" else "red"
    console.print(f"[{colour}]{manifest['status']}[/] {manifest['service']} via {manifest['backend']} "
                  f"in {manifest['wall_seconds']:.2f} s → {run_dir}")
    if summary.get("perfetto_trace"):
        console.print(f"  Perfetto trace: {run_dir}/{summary['perfetto_trace']} (open in ui.perfetto.dev)")


def runs_table(console: Console, listed: list[dict[str, Any]], root: str) -> None:
    table = Table(title=f"Runs in {root} (newest first)", title_justify="left")
    for column in ("when (UTC)", "service", "backend", "status", "wall", "workload", "run"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "running": "yellow"}
    for run in listed:
        colour = colours.get(run["status"], "red")
        wall = f"{run['wall_seconds']:.2f} s" if isinstance(run.get("wall_seconds"), (int, float)) else "-"
        table.add_row(run["started_at"].replace("T", " ")[:19], str(run["service"]), str(run["backend"]),
                      f"[{colour}]{run['status']}[/]", wall, _short(run["workload"], 50), run["run"])
    if not listed:
        table.add_row("-", "-", "-", "no runs yet", "-", "-", "-")
    console.print(table)


def _speedup(value: float | None) -> str:
    return f"{value:.2f}×" if value else "-"


def comparison(console: Console, result: dict[str, Any], top: int = 15) -> None:
    totals = result["totals"]
    console.print(f"[bold]A[/] {result['a']}\n[bold]B[/] {result['b']}")
    console.print(f"GPU time {_ns(totals['gpu_time_ns_a'])} → {_ns(totals['gpu_time_ns_b'])} "
                  f"(speedup {_speedup(totals['speedup'])}); {totals['matched']} kernels in both, "
                  f"{len(result['only_in_a'])} only in A, {len(result['only_in_b'])} only in B")
    table = Table(title="Kernels in both (largest change first)", title_justify="left")
    table.add_column("kernel", overflow="fold", min_width=24, ratio=1)
    for column in ("calls A", "calls B", "total A", "total B", "speedup"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in result["kernels"][:top]:
        table.add_row(_short(row["name"]), f"{row['calls_a']:,}", f"{row['calls_b']:,}", _ns(row["total_ns_a"]),
                      _ns(row["total_ns_b"]), _speedup(row["speedup"]))
    console.print(table)
    for key, label in (("only_in_a", "Only in A"), ("only_in_b", "Only in B")):
        if result[key]:
            only = Table(title=label, title_justify="left")
            only.add_column("kernel", overflow="fold")
            only.add_column("calls", justify="right")
            only.add_column("total", justify="right")
            for row in result[key][:top]:
                only.add_row(_short(row["name"]), f"{row['calls']:,}", _ns(row["total_ns"]))
            console.print(only)


def comparison_markdown(result: dict[str, Any], top: int = 15) -> str:
    totals = result["totals"]
    lines = [f"# {result['a']} vs {result['b']}", "",
             f"GPU time {totals['gpu_time_ns_a']:.0f} ns → {totals['gpu_time_ns_b']:.0f} ns, speedup {_speedup(totals['speedup'])}",
             "", "| kernel | calls A | calls B | total A ns | total B ns | speedup |", "| --- | --- | --- | --- | --- | --- |"]
    for row in result["kernels"][:top]:
        lines.append(f"| {row['name']} | {row['calls_a']} | {row['calls_b']} | {row['total_ns_a']:.0f} | "
                     f"{row['total_ns_b']:.0f} | {_speedup(row['speedup'])} |")
    for key, label in (("only_in_a", "Only in A"), ("only_in_b", "Only in B")):
        if result[key]:
            lines += ["", f"## {label}", ""] + [f"- {r['name']} ({r['calls']} calls, {r['total_ns']:.0f} ns)" for r in result[key][:top]]
    return "\n".join(lines) + "\n"
