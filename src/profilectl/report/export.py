"""Summaries and comparisons as JSON, CSV or Markdown text (HTML is html.py, terminal render.py).

JSON and CSV keep raw numbers in columns named by their unit (`total_ns`, `median_s`); Markdown
shows them in human units (units.py). CSV is one table per file (csv_tables: `report --format csv
-o NAME.csv` writes NAME.<table>.csv for each; stdout gets the main table alone).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from profilectl.report import units
from profilectl.report.summary import (RANK_COLUMNS, SECTIONS, KernelRow, Summary, aggregation_legend, imbalance_line,
                                       job_line, machine_fallbacks, metadata_items, step_time_line)

if TYPE_CHECKING:  # annotations only
    from profilectl.report.compare import Comparison, Gate

KERNEL_COLUMNS = ("name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "percent")


def row_columns(rows: Sequence[KernelRow]) -> tuple[str, ...]:
    """KERNEL_COLUMNS, with self_ns after total_ns where the rows know it (torch operators)."""
    if any(r.self_ns is not None for r in rows):
        return KERNEL_COLUMNS[:3] + ("self_ns",) + KERNEL_COLUMNS[3:]
    return KERNEL_COLUMNS


def json_text(payload: dict[str, Any]) -> str:
    """Readable and fast: one line per top-level key, one line per table row (each row encoded by
    the C encoder; json's indent= would force the pure-Python one, ~0.15 s for 3,000 kernels)."""
    def dump(value: Any) -> str:
        return json.dumps(value, default=str, ensure_ascii=False)

    lines = []
    for key, value in payload.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = ",\n    ".join(dump(v) for v in value)
            lines.append(f"  {dump(key)}: [\n    {rows}\n  ]")
        else:
            lines.append(f"  {dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def to_json(summary: Summary) -> str:
    return json_text(summary.to_dict())


CsvTable = tuple[Sequence[str], list[dict[str, Any]]]  # columns, rows


def csv_tables(summary: Summary) -> dict[str, CsvTable]:
    """Every table of the summary, whole, each one CSV file: name -> (columns, rows). Raw numbers,
    columns named by their unit; `metadata` is key,value rows (the run's date, host, GPU, ...)."""
    tables: dict[str, CsvTable] = {}
    for key, _ in SECTIONS:
        rows: tuple[KernelRow, ...] = getattr(summary, key)
        if rows:
            tables[key] = (row_columns(rows), [dataclasses.asdict(r) for r in rows])
    if summary.timing:
        timing = dataclasses.asdict(summary.timing)
        tables["timing"] = (list(timing), [timing])
    if summary.step_time:
        steps = {k: v for k, v in dataclasses.asdict(summary.step_time).items() if not isinstance(v, (tuple, list))}
        tables["step_time"] = (list(steps), [steps])
    if summary.counters_by_kernel:
        columns = list(dict.fromkeys(k for r in summary.counters_by_kernel for k in r))
        tables["counters"] = (columns, list(summary.counters_by_kernel))
    if summary.hotspots:
        tables["hotspots"] = (("kernel", "instruction", "source", "samples", "percent"),
                              [dataclasses.asdict(h) for h in summary.hotspots])
    if summary.stall_reasons:
        tables["stall_reasons"] = (("reason", "samples", "percent"), [dataclasses.asdict(r) for r in summary.stall_reasons])
    if summary.power:
        gpus = [{k: v for k, v in dataclasses.asdict(g).items() if k != "series"} for g in summary.power.gpus]
        if gpus:
            tables["power"] = (list(gpus[0]), gpus)
        if summary.power.steps:
            energy = [dataclasses.asdict(s) for s in summary.power.steps]
            tables["step_energy"] = (list(energy[0]), energy)
    if summary.ranks:
        tables["ranks"] = (RANK_COLUMNS, [dataclasses.asdict(r) for r in summary.ranks])
    if summary.timeline:
        tables.update(timeline_tables(summary.timeline))
    items = metadata_items(summary)
    if items:
        tables["metadata"] = (("key", "value"), [{"key": k, "value": v} for k, v in items])
    return tables


def timeline_tables(analysis: Any) -> dict[str, CsvTable]:
    """The timeline analysis as flat tables: one row per rank (and `all`), per step, per gap."""
    def flat(row: Any) -> dict[str, Any]:
        values = dataclasses.asdict(row)
        launch = values.pop("launch", None) or {}
        return {**values, **{f"launch_{k}" if not k.startswith("launch") else k: v for k, v in launch.items()}}
    rows = [flat(r) for r in (*analysis.ranks, analysis.merged)] if analysis.ranks else [flat(analysis.merged)]
    tables: dict[str, CsvTable] = {"timeline": (list(rows[0]), rows)}
    if analysis.steps:
        steps = [dataclasses.asdict(s) for s in analysis.steps]
        tables["steps"] = (list(steps[0]), steps)
    if analysis.gaps:
        gaps = [dataclasses.asdict(g) for g in analysis.gaps]
        tables["idle_gaps"] = (list(gaps[0]), gaps)
    return tables


def csv_text(table: CsvTable) -> str:
    columns, rows = table
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main_csv_table(tables: dict[str, CsvTable]) -> str:
    """The table stdout gets: kernels (the one people put in spreadsheets), else the first table."""
    return "kernels" if "kernels" in tables or not tables else next(iter(tables))


def to_csv(tables: dict[str, CsvTable]) -> str:
    """The main table alone (main_csv_table), every row: one CSV document."""
    return csv_text(tables.get(main_csv_table(tables), (KERNEL_COLUMNS, [])))


def _cell(value: Any) -> str:
    return units.number(value).replace("|", "\\|")


def human_rows(columns: Sequence[str], rows: Iterable[Any]) -> Iterable[list[str]]:
    """Rows (dicts or objects) as text in human units, by the unit each column's name carries."""
    for row in rows:
        get = row.get if isinstance(row, dict) else (lambda c, r=row: getattr(r, c, None))
        yield [units.cell(c, get(c)) for c in columns]


def metadata_markdown(summary: Summary) -> list[str]:
    """The run's metadata as a list (date, host, GPU, versions, tool, command, backend and why)."""
    items = metadata_items(summary, backend_shown=summary.run is not None)
    return [f"- **{label}**: {_cell(text)}" for label, text in items] + ([""] if items else [])


def md_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The one Markdown table writer: header, rule, escaped cells."""
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def to_markdown(summary: Summary, top: int = 10) -> str:
    lines = []
    run = summary.run
    if run:
        lines += [f"# {run.service} via {run.backend} — {run.status}", "", run.reason, ""]
        kept, elsewhere = machine_fallbacks(run)
        lines += [f"- fell back from **{f.backend}**: {f.reason}" for f in kept]
        if elsewhere:
            lines.append(f"- not considered on this machine: {', '.join(elsewhere)}")
        lines.append("")
    elif summary.job:
        lines += [f"# SLURM job {summary.job.job_id}.{summary.job.step_id} — {summary.job.status}", "",
                  job_line(summary) or "", ""]
    else:
        lines += [f"# {summary.source.kind}: {summary.source.path}", ""]
    lines += metadata_markdown(summary)
    if summary.kernel_timing:
        lines += [f"Kernel times measured by {summary.kernel_timing}: longer than the same kernels in a trace.", ""]
    timing = summary.timing
    if timing:
        timing_columns = ("runs", "mean_s", "median_s", "p95_s", "min_s", "max_s", "std_s")
        lines += ["## Timing", ""] + md_table([units.heading(c) for c in timing_columns],
                                              human_rows(timing_columns, [timing]))
    if (steps := step_time_line(summary)):
        lines += [f"- {steps}", ""]
    lines += power_markdown(summary)
    for key, title in SECTIONS:
        rows: tuple[KernelRow, ...] = getattr(summary, key)
        if rows:
            shown = row_columns(rows)
            lines += [f"## {title}", ""] + md_table([units.heading(c) for c in shown], human_rows(shown, rows[:top]))
    if summary.counters_by_kernel:
        columns = list(dict.fromkeys(k for r in summary.counters_by_kernel for k in r))
        lines += ["## Counters per kernel", ""] + md_table(columns, ([r.get(c) for c in columns]
                                                                     for r in summary.counters_by_kernel[:top]))
        lines[-1:-1] = [f"- {line}" for line in aggregation_legend(summary)]
    if summary.hotspots:
        lines += ["## PC sampling hotspots", ""] + md_table(
            ("kernel", "instruction", "source", "samples", "%"),
            ((h.kernel, h.instruction, h.source, h.samples, f"{h.percent:.1f}") for h in summary.hotspots[:top]))
    if summary.stall_reasons:
        lines += ["## Stall reasons", ""] + md_table(("reason", "samples", "%"), (
            (s.reason, s.samples, f"{s.percent:.1f}") for s in summary.stall_reasons))
    if summary.timeline:
        from profilectl.report import timeline_view
        lines += timeline_view.markdown(summary.timeline)
    if summary.ranks:
        lines += ["## Per rank", ""] + md_table([units.heading(c) for c in RANK_COLUMNS],
                                                human_rows(RANK_COLUMNS, summary.ranks))
        line = imbalance_line(summary)
        if line:
            lines[-1:-1] = [f"- {line}"]
    return "\n".join(lines)


def power_markdown(summary: Summary) -> list[str]:
    """GPU power, energy and memory sampled during the run: the line, then a row per GPU."""
    if summary.power is None:
        return []
    from profilectl.telemetry import text
    steps = text.steps_line(summary.power)
    return (["## GPU power and energy", "", f"- {text.power_line(summary.power)}"]
            + ([f"- {steps}"] if steps else []) + [""]
            + md_table(text.GPU_COLUMNS, (text.gpu_row(gpu) for gpu in summary.power.gpus)))


def _speedup(value: float | None) -> str:
    return f"{value:.2f}×" if value else "-"


def gate_value(value: float, unit: str) -> str:
    return units.duration_ns(value) if unit == "ns" else units.duration_s(value)


def gate_line(gate: Gate) -> str:
    """The verdict in one line: what a CI log or a pull-request comment shows first."""
    word = {"pass": "PASS", "fail": "FAIL", "measured": "MEASURED"}[gate.verdict]
    limit = f" (threshold +{gate.threshold_percent:g} %)" if gate.threshold_percent is not None else ""
    return (f"{word}: {gate.description} {gate_value(gate.base, gate.unit)} → {gate_value(gate.new, gate.unit)}, "
            f"{gate.change_percent:+.1f} %{limit}")


def gate_markdown(gate: Gate) -> list[str]:
    """The verdict line first, then the gate's table: fit for a pull-request comment."""
    threshold = f"+{gate.threshold_percent:g} %" if gate.threshold_percent is not None else "–"
    lines = [f"**{gate_line(gate)}**", ""] + md_table(
        ("metric", "base", "new", "change", "threshold", "verdict"),
        [(gate.metric, gate_value(gate.base, gate.unit), gate_value(gate.new, gate.unit),
          f"{gate.change_percent:+.1f} %", threshold, gate.verdict)])
    return lines + [f"- {note}" for note in gate.notes] + ([""] if gate.notes else [])


def timing_markdown(result: Comparison) -> list[str]:
    if not result.timing:
        return []
    rows = [(d.stat, units.duration_s(d.a_s), units.duration_s(d.b_s), _speedup(d.speedup)) for d in result.timing]
    return [f"## Timing ({result.timing_runs_a} runs in A, {result.timing_runs_b} in B)", ""] + md_table(
        ("statistic", "A", "B", "speedup"), rows)


def comparison_markdown(result: Comparison, top: int = 15) -> str:
    lines = gate_markdown(result.gate) if result.gate else []
    lines += [f"# {result.a} vs {result.b}", ""]
    lines += [f"> warning: {result.warning}", ""] if result.warning else []
    lines += timing_markdown(result)
    if result.kernels or result.only_in_a or result.only_in_b:
        lines += [f"GPU time {units.duration_ns(result.gpu_time_ns_a)} → {units.duration_ns(result.gpu_time_ns_b)}, "
                  f"speedup {_speedup(result.speedup)}", ""]
        lines += md_table(("kernel", "calls A", "calls B", "total A", "total B", "speedup"),
                          ((r.name, r.calls_a, r.calls_b, units.duration_ns(r.total_ns_a), units.duration_ns(r.total_ns_b),
                            _speedup(r.speedup)) for r in result.kernels[:top]))
    if result.ranks:
        lines += ["## Per rank", ""] + md_table(("rank", "GPU time A", "GPU time B", "speedup"), (
            (d.rank, units.duration_ns(d.total_ns_a), units.duration_ns(d.total_ns_b), _speedup(d.speedup))
            for d in result.ranks))
    for label, only in (("Only in A", result.only_in_a), ("Only in B", result.only_in_b)):
        if only:
            lines += [f"## {label}", ""] + [f"- {r.name} ({r.calls} calls, {units.duration_ns(r.total_ns)})"
                                            for r in only[:top]]
            lines.append("")
    return "\n".join(lines)
