"""Summaries and comparisons as JSON, CSV or Markdown text (HTML is html.py, terminal render.py).

A summary's report goes through its document (sections/ -> renderers/): these are the names the
CLI and other modules call. JSON is the summary itself (summary.json's schema, the stable contract);
CSV is one table per document table (`report --format csv -o NAME.csv` writes NAME.<table>.csv for
each; stdout gets the main table alone). Comparisons are rendered here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Sequence

from profilectl.model import units
from profilectl.report.renderers.machine import CsvTable, csv_text, main_csv_table, to_csv  # noqa: F401
from profilectl.report.renderers.markdown import escape, md_table

if TYPE_CHECKING:  # annotations only
    from profilectl.report.compare import Comparison, Gate
    from profilectl.read.summary import Summary


def json_text(payload: dict[str, Any]) -> str:
    """Readable and fast: one line per top-level key, one line per table row, each row encoded by
    msgspec's encoder (json's C encoder where msgspec is missing: 3x the time for 10,000 rows; json's
    indent= would force the pure-Python one, ~0.15 s for 3,000 kernels). A NaN or infinity is null,
    as JSON has no such numbers."""
    dump = _dumps()
    parts = ["{\n"]  # joined once: a 3,000-kernel report is 3 MB, and each join or f-string copies it all
    for key, value in payload.items():
        parts += [",\n  " if len(parts) > 1 else "  ", dump(key)]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            parts.append(": [\n    ")
            for i, row in enumerate(value):
                parts += [",\n    " if i else "", dump(row)]
            parts.append("\n  ]")
        else:
            parts += [": ", dump(value)]
    parts.append("\n}\n")
    return "".join(parts)


def _dumps() -> Callable[[Any], str]:
    try:
        import msgspec
    except ImportError:
        def finite(value: Any) -> Any:
            return None if isinstance(value, float) and value - value != 0 else value
        return lambda value: json.dumps(_walk(value, finite), default=str, ensure_ascii=False)
    encode = msgspec.json.Encoder(enc_hook=str).encode
    return lambda value: encode(value).decode()


def _walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, leaf) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, leaf) for v in value]
    return leaf(value)


def to_json(summary: "Summary") -> str:
    return json_text(json_document(summary))


def json_document(summary: "Summary") -> dict[str, Any]:
    """`report --format json` (schema 2, docs/definitions.md): the summary's data (the run's facts,
    every quantity under its one name) and, beside it, the document every other format renders: its
    title, every finding (verdict, sentence, evidence, next step) and its sections' tables with units."""
    from profilectl.report.renderers.machine import to_dict
    from profilectl.report.sections import build_document
    document = to_dict(build_document(summary))
    payload = summary.to_dict()
    payload["title"] = document["title"]
    payload["headline"] = document["headline"]  # where the time goes, in one line
    payload["findings"] = [finding for section in document["sections"] for finding in section["findings"]]
    payload["sections"] = document["sections"]
    return payload


def csv_tables(summary: "Summary") -> dict[str, CsvTable]:
    """Every table of the summary's document, whole, each one CSV file: name -> (columns, rows)."""
    from profilectl.report.renderers.machine import csv_tables as document_tables
    from profilectl.report.sections import build_document
    return document_tables(build_document(summary))


def to_markdown(summary: "Summary", top: int = 10) -> str:
    from profilectl.report.renderers import markdown
    from profilectl.report.sections import build_document
    return markdown.render(build_document(summary), top)


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
    rows = [(d.stat, units.duration_s(d.a_s), units.duration_s(d.b_s), units.speedup(d.speedup)) for d in result.timing]
    return [f"## Timing ({result.timing_runs_a} runs in A, {result.timing_runs_b} in B)", ""] + md_table(
        ("statistic", "A", "B", "speedup"), rows)


def _matched_markdown(what: str, rows: Sequence[Any], top: int, time: str = "total") -> list[str]:
    """Names found in both runs (kernels, or operators of CPU-only traces: time "self"), largest change first."""
    return md_table((what, "calls A", "calls B", f"{time} A", f"{time} B", "speedup"),
                    ((r.name, r.calls_a, r.calls_b, units.duration_ns(getattr(r, f"{time}_ns_a")),
                      units.duration_ns(getattr(r, f"{time}_ns_b")), units.speedup(r.speedup)) for r in rows[:top]))


def comparison_markdown(result: Comparison, top: int = 15) -> str:
    lines = gate_markdown(result.gate) if result.gate else []
    lines += [f"# {escape(result.a)} vs {escape(result.b)}", ""]
    lines += [f"> warning: {escape(result.warning)}", ""] if result.warning else []
    lines += timing_markdown(result)
    if result.kernels or result.only_in_a or result.only_in_b:
        lines += [f"GPU time {units.duration_ns(result.gpu_time_ns_a)} → {units.duration_ns(result.gpu_time_ns_b)}, "
                  f"speedup {units.speedup(result.speedup)}", ""]
        lines += _matched_markdown("kernel", result.kernels, top)
    elif not result.timing:  # CPU-only traces: their operators, or nothing to compare
        from profilectl.report.compare import nothing_line, operators_line
        if result.operators:
            lines += [operators_line(result), ""]
            lines += _matched_markdown("operator", result.operators, top, time="self")
        else:
            lines += [nothing_line(), ""]
    if result.ranks:
        lines += ["## Per rank", ""] + md_table(("rank", "GPU time A", "GPU time B", "speedup"), (
            (d.rank, units.duration_ns(d.total_ns_a), units.duration_ns(d.total_ns_b), units.speedup(d.speedup))
            for d in result.ranks))
    for label, only in (("Only in A", result.only_in_a), ("Only in B", result.only_in_b)):
        if only:
            lines += [f"## {label}", ""] + [f"- {escape(r.name)} ({r.calls} calls, {units.duration_ns(r.total_ns)})"
                                            for r in only[:top]]
            lines.append("")
    return "\n".join(lines)
