"""Inline SVG charts of the HTML report, one function per Chart.kind (model/document.py).

A chart plots a table of its section (Chart.table) by column names, or, where the data is not a
table people read (the busy curves), what Chart.extra carries. A new kind is one function added to
CHARTS; a kind without one is left out of the page, never an error.
"""

from __future__ import annotations

from html import escape
from typing import Any, Callable

from profilectl.model.document import Chart, Section, TableBlock
from profilectl.model.units import duration_ns, shorten

PALETTE = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00", "#b82e2e",
           "#316395", "#994499")


def column(table: TableBlock, name: str | None) -> list[Any]:
    """A column's values by name ([] when the table has no such column)."""
    names = [c.name for c in table.columns]
    if name not in names:
        return []
    index = names.index(name)
    return [row[index] for row in table.rows]


def bar(chart: Chart, table: TableBlock, top: int) -> str:
    """The largest values as horizontal bars, each with its share of the column's total; with extra
    `shares` False (ranges that nest: their total is no whole), each with its value instead."""
    values, labels = column(table, chart.y), column(table, chart.label)
    if not values:
        return ""
    shares = dict(chart.extra).get("shares", True)
    total = sum(v or 0 for v in values) or 1.0
    values, labels = values[:top], labels[:top]
    biggest = max(v or 0 for v in values) or 1.0
    height = 22 * len(values) + 10
    bars = []
    for i, (value, name) in enumerate(zip(values, labels)):
        width = 500 * (value or 0) / biggest
        y = 5 + 22 * i
        bars.append(f'<rect x="420" y="{y}" width="{width:.1f}" height="16" fill="{PALETTE[i % len(PALETTE)]}">'
                    f'<title>{escape(str(name))}</title></rect>'
                    f'<text x="414" y="{y + 12}" text-anchor="end">{escape(shorten(str(name), 52))}</text>'
                    f'<text x="{424 + width:.1f}" y="{y + 12}">'
                    f'{f"{100 * (value or 0) / total:.1f} %" if shares else escape(duration_ns(value))}</text>')
    label = "top kernels" if chart.table == "kernels" else chart.title
    return f'<svg role="img" aria-label="{escape(label)}" width="1000" height="{height}">{"".join(bars)}</svg>'


def share(chart: Chart, table: TableBlock, top: int) -> str:
    """One stacked bar: the first rows' shares of the column's total, the rest together."""
    extra = dict(chart.extra)
    values, labels = column(table, chart.y), column(table, chart.label)
    total = sum(v or 0 for v in values)
    if total <= 0:
        return ""
    count = int(extra.get("top", top))
    parts = [(str(n), v or 0) for n, v in zip(labels[:count], values[:count])]
    rest_label = str(extra.get("rest", "other"))
    rest = total - sum(v for _, v in parts)
    if rest > 0:
        parts.append((rest_label, rest))
    x, shapes, legend = 0.0, [], []
    for i, (name, value) in enumerate(parts):
        width = 900 * value / total
        colour = PALETTE[i % len(PALETTE)] if name != rest_label else "#bbbbbb"
        shapes.append(f'<rect x="{x:.1f}" y="0" width="{width:.1f}" height="30" fill="{colour}">'
                      f'<title>{escape(name)}: {100 * value / total:.1f} %</title></rect>')
        legend.append(f'<li><span style="color:{colour}">■</span> {escape(shorten(name, 70))} — '
                      f'{100 * value / total:.1f} %</li>')
        x += width
    return (f'<svg role="img" aria-label="share of GPU time" width="900" height="30">{"".join(shapes)}</svg>'
            f'<ul style="list-style:none;padding:0">{"".join(legend)}</ul>')


def busy_timeline(chart: Chart, table: TableBlock, top: int, width: int = 900, lane: int = 26) -> str:
    """GPU busy over time, one lane per rank: each bucket's shade is its busy share (extra: curves
    of (rank, start_ns, bucket_ns, busy fractions))."""
    curves = dict(chart.extra).get("curves") or ()
    if not curves:
        return ""
    parts = []
    for index, (rank, _start, _bucket, busy) in enumerate(curves):
        y = index * lane
        step = width / max(1, len(busy))
        parts.append(f'<text x="0" y="{y + lane * 0.65:.0f}" font-size="11">rank {escape(str(rank))}</text>')
        for i, share_busy in enumerate(busy):
            if share_busy > 0:
                parts.append(f'<rect class="busy" x="{80 + i * step:.1f}" y="{y + 3}" width="{step + 0.3:.1f}" '
                             f'height="{lane - 6}" fill="#3366cc" fill-opacity="{max(0.08, share_busy):.2f}">'
                             f'<title>{share_busy * 100:.0f} % busy</title></rect>')
    total = curves[0][2] * len(curves[0][3])
    height = lane * len(curves) + 16
    parts.append(f'<text x="80" y="{height - 2}" font-size="10">0</text>'
                 f'<text x="{80 + width:.0f}" y="{height - 2}" font-size="10" text-anchor="end">'
                 f'{duration_ns(total)}</text>')
    return (f'<svg role="img" aria-label="GPU busy over time" class="timeline-chart" width="{width + 90}" '
            f'height="{height}">{"".join(parts)}</svg>')


def steps(chart: Chart, table: TableBlock, top: int, width: int = 900, height: int = 160) -> str:
    """Per row: x (outline) and y (filled) as bars; rows flagged by extra's `grey` column greyed."""
    walls, busy = column(table, chart.x), column(table, chart.y)
    grey = column(table, dict(chart.extra).get("grey")) or [False] * len(walls)
    numbers = column(table, "step") or list(range(len(walls)))
    if not walls:
        return ""
    longest = max(walls) or 1
    bar_w = width / len(walls)
    parts = []
    for i, (wall, gpu, warm, number) in enumerate(zip(walls, busy, grey, numbers)):
        x = i * bar_w
        wall_h, busy_h = height * wall / longest, height * gpu / longest
        colour = "#999999" if warm else "#109618"
        parts.append(f'<rect class="step" x="{x + 1:.1f}" y="{height - wall_h:.1f}" width="{max(1.0, bar_w - 2):.1f}" '
                     f'height="{wall_h:.1f}" fill="none" stroke="{colour}"><title>step {number}: '
                     f'{duration_ns(wall)}, GPU busy {duration_ns(gpu)}</title></rect>')
        parts.append(f'<rect x="{x + 1:.1f}" y="{height - busy_h:.1f}" width="{max(1.0, bar_w - 2):.1f}" '
                     f'height="{busy_h:.1f}" fill="{colour}" fill-opacity="0.6"/>')
    return (f'<svg role="img" aria-label="time per step" class="steps-chart" width="{width}" height="{height}">'
            f'{"".join(parts)}</svg>')


def line(chart: Chart, table: TableBlock, top: int) -> str:
    """y over x, one line per value of the label column (GPU power over time, one line per GPU)."""
    from profilectl.report.power_chart import power_svg
    series: dict[Any, list[tuple[float, float]]] = {}
    for label, x, y in zip(column(table, chart.label), column(table, chart.x), column(table, chart.y)):
        series.setdefault(label, []).append((x, y))
    extra = dict(chart.extra)
    return power_svg(list(series.items()), str(extra.get("source", "")), what=str(extra.get("what", "GPU power")),
                     unit=str(extra.get("unit", "W")),
                     series_name=str(extra.get("series_name", "GPU {}")), scale=float(extra.get("scale", 1.0)),
                     x_what=str(extra.get("x_what", "time (s)")))


def loglog_scatter(chart: Chart, table: TableBlock, top: int) -> str:
    """The roofline: kernels on log-log axes under their roofs (report/roofline_chart.py draws it)."""
    from profilectl.report.roofline_chart import roofline_svg
    return roofline_svg(Section(key="roofline", title=chart.title, tables=(table,), charts=(chart,)))


ChartRenderer = Callable[[Chart, TableBlock, int], str]
# One entry per Chart.kind; the roofline section's "loglog_scatter" registers here.
CHARTS: dict[str, ChartRenderer] = {"bar": bar, "share": share, "busy_timeline": busy_timeline, "steps": steps,
                                    "line": line, "loglog_scatter": loglog_scatter}


def render_chart(chart: Chart, section: Section, top: int) -> str:
    draw = CHARTS.get(chart.kind)
    table = next((t for t in section.tables if t.key == chart.table), None)
    if draw is None or table is None:
        return ""
    return draw(chart, table, top)
