"""Summaries as JSON, CSV or Markdown text (the HTML report is in html.py)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

KERNEL_COLUMNS = ("name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "percent")
SECTIONS = (("kernels", "Top kernels"), ("api", "API calls"), ("memory_copies", "Memory copies"),
            ("operators", "Operators"))


def to_json(summary: dict[str, Any]) -> str:
    """Readable and fast: one line per top-level key, one line per table row (each row encoded by
    the C encoder; json's indent= would force the pure-Python one, ~0.15 s for 3,000 kernels)."""
    def dump(value: Any) -> str:
        return json.dumps(value, default=str, ensure_ascii=False)

    lines = []
    for key, value in summary.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = ",\n    ".join(dump(v) for v in value)
            lines.append(f"  {dump(key)}: [\n    {rows}\n  ]")
        else:
            lines.append(f"  {dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def to_csv(summary: dict[str, Any]) -> str:
    """The kernels table (every kernel), one row each: the table people put in spreadsheets."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=KERNEL_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(summary.get("kernels") or [])
    return out.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value).replace("|", "\\|")


def to_markdown(summary: dict[str, Any], top: int = 10) -> str:
    lines = []
    run = summary.get("run")
    if run:
        lines += [f"# {run['service']} via {run['backend']} — {run['status']}", "", f"{run['reason']}", ""]
        for fallback in run.get("fallbacks") or []:
            lines.append(f"- fell back from **{fallback['backend']}**: {fallback['reason']}")
        lines.append("")
    else:
        source = summary.get("source") or {}
        lines += [f"# {source.get('kind', 'profile')}: {source.get('path', '')}", ""]
    timing = summary.get("timing")
    if timing:
        lines += ["## Timing", "", "| runs | mean s | median s | p95 s | min s | max s | std s |",
                  "| --- | --- | --- | --- | --- | --- | --- |",
                  "| " + " | ".join([str(timing["runs"])] + [f"{timing[k + '_s']:.4f}" for k in
                                                              ("mean", "median", "p95", "min", "max", "std")]) + " |", ""]
    for key, title in SECTIONS:
        rows = summary.get(key) or []
        if rows:
            lines += [f"## {title}", "", "| " + " | ".join(KERNEL_COLUMNS) + " |",
                      "| " + " | ".join("---" for _ in KERNEL_COLUMNS) + " |"]
            lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in KERNEL_COLUMNS) + " |" for r in rows[:top]]
            lines.append("")
    counters = summary.get("counters_by_kernel") or []
    if counters:
        columns = list(dict.fromkeys(k for r in counters for k in r))
        lines += ["## Counters per kernel", "", "| " + " | ".join(columns) + " |",
                  "| " + " | ".join("---" for _ in columns) + " |"]
        lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in counters[:top]]
        lines.append("")
    if summary.get("ranks"):
        lines += ["## Per rank", "", "| rank | kernels | dispatches | total_ns |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['rank']} | {r['kernels']} | {r['dispatches']} | {r['total_ns']:.0f} |" for r in summary["ranks"]]
        lines.append("")
    return "\n".join(lines)
