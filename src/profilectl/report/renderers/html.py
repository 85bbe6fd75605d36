"""The document as one self-contained HTML page: inline CSS and SVG charts, no script, no network.

The run's metadata (date, host, GPU, versions, tool, command) heads it; then each section: its
findings, notes, charts (charts.py) and tables in human units, the raw value of a number on hover.
"""

from __future__ import annotations

from html import escape
from typing import Any

from profilectl.model import units
from profilectl.model.document import Document, Finding, Section, TableBlock
from profilectl.report.renderers.charts import render_chart
from profilectl.report.renderers.common import cell, human_columns, row_limit

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0;
font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left;
min-width:22em;max-width:60em;word-break:break-all}th{background:#f0f0f0}.meta{color:#555}svg text{font-size:12px}
table.metadata td{text-align:left}table.metadata td:first-child{min-width:8em;font-weight:bold}
.finding{border-left:4px solid #dc3912;padding:0 1em;margin:1em 0}"""
LONG_NAME = 120


def table_html(table: TableBlock, top: int) -> str:
    shown = human_columns(table)
    head = "".join(f"<th>{escape(table.columns[i].title)}</th>" for i in shown)
    body = []
    for row in table.rows[:row_limit(table, top)]:
        cells = []
        for position, i in enumerate(shown):
            value = row[i]
            text = cell(table.columns[i], value)
            if position == 0 and isinstance(value, str) and len(value) > LONG_NAME:
                cells.append(f'<td title="{escape(value)}">{escape(units.shorten(value, LONG_NAME))}</td>')
            else:
                exact = f' title="{value!r}"' if isinstance(value, float) else ""  # the raw value on hover
                cells.append(f"<td{exact}>{escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def finding_html(finding: Finding) -> str:
    scope = f" <span class=meta>({escape(finding.scope)})</span>" if finding.scope else ""
    evidence = "".join(f"<li>{escape(line)}</li>" for line in finding.evidence)
    step = f"<p>next: {escape(finding.next_step)}</p>" if finding.next_step else ""
    return (f'<div class="finding" data-verdict="{escape(finding.verdict)}"><p><b>{escape(finding.verdict)}</b>{scope}: '
            f"{escape(finding.sentence)}</p>{'<ul>' + evidence + '</ul>' if evidence else ''}{step}</div>")


def section_html(section: Section, top: int) -> list[str]:
    parts = [f"<h2>{escape(section.title)}</h2>"]
    parts += [finding_html(f) for f in section.findings]
    if section.notes:
        parts.append("<ul class=meta>" + "".join(f"<li>{escape(n)}</li>" for n in section.notes) + "</ul>")
    for chart in section.charts:
        svg = render_chart(chart, section, top)
        if svg:
            parts += [f"<h3>{escape(chart.title)}</h3>", svg]
    for table in section.tables:
        if row_limit(table, top) > 0 and table.rows:
            if table.title and table.title != section.title:
                parts.append(f"<h3>{escape(table.title)}</h3>")
            parts.append(table_html(table, top))
    return parts


def render(document: Document, top: int = 15, **_: Any) -> str:
    parts = [f"<h1>{escape(document.title)}</h1>"]
    if document.metadata:
        rows = "".join(f"<tr><td>{escape(label)}</td><td>{escape(text)}</td></tr>" for label, text in document.metadata)
        parts.append(f'<table class="metadata">{rows}</table>')
    for section in document.sections:
        parts += section_html(section, top)
    return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{escape(document.title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
