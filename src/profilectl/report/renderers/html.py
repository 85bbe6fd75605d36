"""The document as one self-contained HTML page: inline CSS and SVG charts, no script, no network.

A page to send: its title names the tool and the run; then where the time goes in one line, and
every finding (verdict, evidence, next step) before anything else; then the run's metadata (date,
host, GPU, versions, tool, command); then each section: its notes, charts (charts.py) and tables in
human units, the raw value of a number on hover. A heading is never repeated: a table or chart
titled like its section is not headed again.
"""

from __future__ import annotations

from html import escape
from typing import Any

from profilectl.model import units
from profilectl.model.document import Document, Finding, Section, TableBlock
from profilectl.report.renderers.charts import render_chart
from profilectl.report.renderers.common import HEADLINE, cell, human_columns, row_limit

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:80em;padding:0 1.5em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h1 .tool{color:#3366cc}.subtitle{color:#555;margin-top:0}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.headline{font-size:1.15em;background:#eef3fb;border-left:4px solid #3366cc;padding:.6em 1em;margin:1em 0}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left;min-width:22em;max-width:60em;white-space:normal;overflow-wrap:anywhere}
th{background:#f0f0f0}.meta{color:#555}svg text{font-size:12px}
table.metadata{font-size:12px}table.metadata td{text-align:left;border:none;padding:1px 8px;white-space:normal}
table.metadata td:first-child{min-width:8em;font-weight:bold;color:#555}
.finding{border-left:4px solid #dc3912;padding:0 1em;margin:1em 0}.finding p{margin:.4em 0}
.charts{display:flex;flex-wrap:wrap;gap:1em 3em;align-items:flex-start}"""
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


def section_html(section: Section, top: int, findings: bool = True) -> list[str]:
    """A section under its heading; `findings`: its findings too (the page shows them first instead)."""
    first = next((t.title for t in section.tables if t.title and row_limit(t, top) > 0 and t.rows), None)
    # a first table titled like its section, told more ("Timing (30 runs)"), heads the section itself
    title = first if first and first.startswith(section.title) else section.title
    parts = [f'<h2 id="{escape(section.key)}">{escape(title)}</h2>']
    if findings:
        parts += [finding_html(f) for f in section.findings]
    if section.notes:
        parts.append("<ul class=meta>" + "".join(f"<li>{escape(n)}</li>" for n in section.notes) + "</ul>")
    headed = {section.title, title}
    charts = []
    for chart in section.charts:
        svg = render_chart(chart, section, top)
        if svg:
            charts.append(("" if chart.title in headed else f"<h3>{escape(chart.title)}</h3>") + svg)
            headed.add(chart.title)
    if charts:
        parts.append('<div class="charts">' + "".join(f"<div>{c}</div>" for c in charts) + "</div>")
    for table in section.tables:
        if row_limit(table, top) > 0 and table.rows:
            if table.title and table.title not in headed:
                parts.append(f"<h3>{escape(table.title)}</h3>")
                headed.add(table.title)
            parts.append(table_html(table, top))
    return parts


def render(document: Document, top: int = 15, **_: Any) -> str:
    tool, _sep, rest = document.title.partition(" — ")
    heading = (f'<span class="tool">{escape(tool)}</span> — {escape(rest)}' if rest else escape(document.title))
    parts = [f"<h1>{heading}</h1>"]
    if document.headline:
        parts.append(f'<p class="headline"><b>{escape(HEADLINE)}:</b> {escape(document.headline)}</p>')
    findings = [f for section in document.sections for f in section.findings]
    parts += [finding_html(f) for f in findings]
    if document.metadata:
        rows = "".join(f"<tr><td>{escape(label)}</td><td>{escape(text)}</td></tr>" for label, text in document.metadata)
        parts.append(f'<table class="metadata">{rows}</table>')
    for section in document.sections:
        if section.findings and not (section.notes or section.tables or section.charts):
            continue  # its findings are the page's first lines
        parts += section_html(section, top, findings=False)
    return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{escape(document.title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
