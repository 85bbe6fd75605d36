"""A self-contained HTML report: inline CSS and SVG charts, no script, no network.

Charts: top kernels by total time (bars) and the share of GPU time (one stacked bar, top kernels
plus "other"). Tables: the same sections as the terminal report, in human units (units.py). The
run's metadata (date, host, GPU, versions, tool, command) heads it; of the backends passed over,
only those that concern the machine the run was made on are listed.
"""

from __future__ import annotations

import dataclasses
from html import escape
from typing import Any, Sequence

from profilectl.report import units
from profilectl.report.export import row_columns
from profilectl.report.summary import (RANK_COLUMNS, SECTIONS, KernelRow, Summary, aggregation_legend, imbalance_line,
                                       job_line, machine_fallbacks, metadata_items, step_time_line)

PALETTE = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00", "#b82e2e",
           "#316395", "#994499")
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0;
font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left;
min-width:22em;max-width:60em;word-break:break-all}th{background:#f0f0f0}.meta{color:#555}svg text{font-size:12px}
table.metadata td{text-align:left}table.metadata td:first-child{min-width:8em;font-weight:bold}"""


def _short(name: str, width: int = 70) -> str:
    return units.shorten(name, width)


def bar_chart(rows: Sequence[KernelRow], top: int) -> str:
    rows = rows[:top]
    if not rows:
        return ""
    biggest = max(r.total_ns for r in rows) or 1.0
    height = 22 * len(rows) + 10
    bars = []
    for i, row in enumerate(rows):
        width = 500 * row.total_ns / biggest
        y = 5 + 22 * i
        label = escape(_short(row.name, 52))
        bars.append(f'<rect x="420" y="{y}" width="{width:.1f}" height="16" fill="{PALETTE[i % len(PALETTE)]}">'
                    f'<title>{escape(row.name)}</title></rect>'
                    f'<text x="414" y="{y + 12}" text-anchor="end">{label}</text>'
                    f'<text x="{424 + width:.1f}" y="{y + 12}">{row.percent:.1f} %</text>')
    return f'<svg role="img" aria-label="top kernels" width="1000" height="{height}">{"".join(bars)}</svg>'


def share_chart(rows: Sequence[KernelRow], top: int) -> str:
    total = sum(r.total_ns for r in rows)
    if total <= 0:
        return ""
    parts = [(r.name, r.total_ns) for r in rows[:top]]
    rest = total - sum(v for _, v in parts)
    if rest > 0:
        parts.append(("other kernels", rest))
    x, shapes, legend = 0.0, [], []
    for i, (name, value) in enumerate(parts):
        width = 900 * value / total
        colour = PALETTE[i % len(PALETTE)] if name != "other kernels" else "#bbbbbb"
        shapes.append(f'<rect x="{x:.1f}" y="0" width="{width:.1f}" height="30" fill="{colour}">'
                      f'<title>{escape(name)}: {100 * value / total:.1f} %</title></rect>')
        legend.append(f'<li><span style="color:{colour}">■</span> {escape(_short(name))} — {100 * value / total:.1f} %</li>')
        x += width
    return (f'<svg role="img" aria-label="share of GPU time" width="900" height="30">{"".join(shapes)}</svg>'
            f'<ul style="list-style:none;padding:0">{"".join(legend)}</ul>')


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], top: int, unit_named: bool = True) -> str:
    """Rows as a table; unit_named: columns are named by their unit (total_ns, median_s) and shown in
    human units; otherwise (counters) values are plain numbers."""
    head = "".join(f"<th>{escape(units.heading(c) if unit_named else str(c))}</th>" for c in columns)
    body = []
    for row in rows[:top]:
        cells = []
        for i, c in enumerate(columns):
            value = row.get(c)
            if value is None or value == "":
                cells.append(f"<td>{units.MISSING}</td>")  # the tool does not report this (ncu: no per-launch min/max)
            elif i == 0 and isinstance(value, str) and len(value) > 120:
                cells.append(f'<td title="{escape(value)}">{escape(_short(value, 120))}</td>')
            else:
                text = units.cell(c, value) if unit_named else units.number(value)
                exact = f' title="{value!r}"' if isinstance(value, float) else ""  # the raw value on hover
                cells.append(f"<td{exact}>{escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def metadata_table(summary: Summary) -> str:
    items = metadata_items(summary, backend_shown=summary.run is not None)
    if not items:
        return ""
    rows = "".join(f"<tr><td>{escape(label)}</td><td>{escape(text)}</td></tr>" for label, text in items)
    return f'<table class="metadata">{rows}</table>'


def power_html(summary: Summary) -> list[str]:
    """GPU power sampled during the run: the line, the power over time, a row per GPU."""
    from profilectl.report.power_chart import power_chart
    from profilectl.telemetry import text
    power = summary.power
    assert power is not None
    parts = ["<h2>GPU power and energy</h2>", f"<p class=meta>{escape(text.power_line(power))}</p>"]
    if (steps := text.steps_line(power)):
        parts.append(f"<p class=meta>{escape(steps)}</p>")
    parts.append(power_chart(power))
    parts.append(text_table(text.GPU_COLUMNS, [text.gpu_row(g) for g in power.gpus]))
    return parts


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of cells already written for people (the timeline's, the power's)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(summary: Summary, top: int = 15) -> str:
    run = summary.run
    source = summary.source
    title = f"{run.service} via {run.backend} — {run.status}" if run else \
        f"SLURM job {summary.job.job_id}.{summary.job.step_id} — {summary.job.status}" if summary.job else \
        f"{source.kind}: {source.path}"
    parts = [f"<h1>{escape(title)}</h1>"]
    if summary.job:
        parts.append(f"<p class=meta>{escape(job_line(summary) or '')}</p>")
    if run:
        parts.append(f"<p class=meta>{escape(run.reason)}</p>")
        shown, hidden = machine_fallbacks(run)
        if shown:
            parts.append("<ul>" + "".join(f"<li>fell back from <b>{escape(f.backend)}</b>: {escape(f.reason)}</li>"
                                          for f in shown) + "</ul>")
        if hidden:
            parts.append(f"<p class=meta>not considered on this machine: {escape(', '.join(hidden))}</p>")
    parts.append(metadata_table(summary))
    totals = summary.totals
    if totals.dispatches:
        parts.append(f"<p class=meta>{totals.dispatches:,} dispatches of {totals.kernels:,} kernels, "
                     f"{escape(units.duration_ns(totals.gpu_time_ns))} of GPU time</p>")
    if summary.kernel_timing:
        parts.append(f"<p class=meta>Kernel times measured by {escape(summary.kernel_timing)}: longer than the same "
                     "kernels in a trace.</p>")
    if summary.kernels:
        parts += ["<h2>Top kernels by total time</h2>", bar_chart(summary.kernels, top),
                  "<h2>Share of GPU time</h2>", share_chart(summary.kernels, 10)]
    if summary.timing:
        timing = dataclasses.asdict(summary.timing)
        parts += ["<h2>Timing</h2>", _table([timing], list(timing), 1)]
    if (steps := step_time_line(summary)):
        parts.append(f"<p class=meta>{escape(steps)}</p>")
    for key, heading in SECTIONS:
        rows: tuple[KernelRow, ...] = getattr(summary, key)
        if rows:
            parts += [f"<h2>{heading}</h2>", _table([dataclasses.asdict(r) for r in rows[:top]], row_columns(rows), top)]
    counters = summary.counters_by_kernel
    if counters:
        parts += ["<h2>Counters per kernel</h2>",
                  _table(counters, list(dict.fromkeys(k for r in counters for k in r)), top, unit_named=False)]
        parts.append("<ul class=meta>" + "".join(f"<li>{escape(line)}</li>" for line in aggregation_legend(summary))
                     + "</ul>")
    if summary.hotspots:
        parts += ["<h2>PC sampling hotspots</h2>", _table([dataclasses.asdict(h) for h in summary.hotspots[:top]],
                                                         ["kernel", "instruction", "source", "samples", "percent"], top)]
    if summary.stall_reasons:
        parts += ["<h2>Stall reasons</h2>", _table([dataclasses.asdict(s) for s in summary.stall_reasons],
                                                  ["reason", "samples", "percent"], 100)]
    if summary.power:
        parts += power_html(summary)
    if summary.timeline:
        from profilectl.report import timeline_view
        parts.append(timeline_view.html(summary.timeline))
    if summary.ranks:
        parts += ["<h2>Per rank</h2>", _table([dataclasses.asdict(r) for r in summary.ranks], RANK_COLUMNS, 1000)]
        line = imbalance_line(summary)
        if line:
            parts.append(f"<p class=meta>{escape(line)}</p>")
    notes = (run.notes if run else ()) + summary.notes
    if notes:
        parts += ["<h2>Notes</h2>", "<ul class=meta>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"]
    return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{escape(title)}</title><style>{STYLE}</style>"
            f"</head><body>{''.join(parts)}</body></html>\n")
