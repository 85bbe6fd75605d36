"""The roofline chart as one self-contained SVG: log-log axes (FLOP per HBM byte, FLOP/s), the
bandwidth roofs (HBM, L2) rising to the compute roofs of the precisions the kernels use, each
labelled, and one point per kernel sized by its GPU time and coloured by its verdict. Kernels
that did no floating-point work have no place on these axes: they sit on the chart's floor, hollow,
and say so in their tooltip.

Reads only the section (its loglog_scatter chart, the table it names and the roofs in `extra`)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from profilectl.model.document import Chart, Section
from profilectl.model.units import si

WIDTH, HEIGHT = 760, 460
LEFT, RIGHT, TOP, BOTTOM = 78, 170, 20, 52  # margins: axis labels left/bottom, roof labels right
COLOURS = {"memory-bound": "#1f77b4", "compute-bound": "#d62728", "latency-bound": "#ff7f0e", "unknown": "#7f7f7f"}
ROOF_COLOURS = {"hbm": "#1f77b4", "l2": "#17becf", "lds": "#9467bd"}
COMPUTE_COLOUR = "#444444"
ALWAYS_DRAWN = ("vector_fp32",)  # the compute roof every kernel can reach, drawn even when unused


def _chart(section: Section) -> Chart | None:
    return next((c for c in section.charts if c.kind == "loglog_scatter"), None)


def _points(section: Section, chart: Chart) -> list[dict[str, Any]]:
    table = next((t for t in section.tables if t.key == chart.table), None)
    if table is None:
        return []
    index = {c.name: i for i, c in enumerate(table.columns)}
    verdict_column = dict(chart.extra).get("verdict", "verdict")
    points = []
    for row in table.rows:
        def get(name: str | None) -> Any:
            return row[index[name]] if name in index else None
        points.append({"label": str(get(chart.label) or ""), "x": get(chart.x), "y": get(chart.y),
                       "size": float(get(chart.size) or 0.0), "verdict": str(get(verdict_column) or "unknown"),
                       "main": get("main_precision")})
    return points


def _log_range(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    return 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high) + 1e-9)


def roofline_svg(section: Section) -> str:
    """The section's roofline chart as an <svg> element ('' when the section has none)."""
    chart = _chart(section)
    if chart is None:
        return ""
    points = _points(section, chart)
    roofs = [dict(zip(("name", "label", "kind", "value", "unit", "source"), roof))
             for roof in dict(chart.extra).get("roofs", ())]
    bandwidth = [r for r in roofs if r["kind"] == "bandwidth" and r["name"] in ("hbm", "l2") and r["value"] > 0]
    used = {str(p["main"]) for p in points if p["main"]}
    compute = [r for r in roofs if r["kind"] == "compute" and r["value"] > 0
               and (r["label"] in used or r["name"] in ALWAYS_DRAWN)]
    placed = [p for p in points if isinstance(p["x"], (int, float)) and isinstance(p["y"], (int, float))
              and p["x"] > 0 and p["y"] > 0]
    hbm = next((r["value"] for r in bandwidth if r["name"] == "hbm"), None)
    xs = [p["x"] for p in placed] + ([r["value"] / hbm for r in compute] if hbm else [])
    ys = [p["y"] for p in placed] + [r["value"] for r in compute]
    if not xs:
        xs = [0.01, 1000.0]
    if not ys:
        ys = [1e9, 1e15]
    xmin, xmax = _log_range(xs + [min(xs) / 10, max(xs) * 3])  # room around the outermost points
    ymin, ymax = _log_range(ys + [min(ys) / 10, max(ys) * 3])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + plot_w * (math.log10(x) - math.log10(xmin)) / (math.log10(xmax) - math.log10(xmin))

    def sy(y: float) -> float:
        return TOP + plot_h * (1 - (math.log10(y) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline" role="img" aria-label="roofline" '
           f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(chart.title)}</title>',
           f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#ffffff" stroke="#999999"/>']
    # decade grid and tick labels
    for exponent in range(round(math.log10(xmin)), round(math.log10(xmax)) + 1):
        x = sx(10.0 ** exponent)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" stroke="#eeeeee"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 14}" text-anchor="middle">{10.0 ** exponent:g}</text>')
    for exponent in range(round(math.log10(ymin)), round(math.log10(ymax)) + 1):
        y = sy(10.0 ** exponent)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{si(10.0 ** exponent, "")}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 14}" text-anchor="middle">'
               'arithmetic intensity (FLOP per HBM byte)</text>')
    out.append(f'<text transform="translate(16 {TOP + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
               'FLOP/s</text>')
    top_compute = max((r["value"] for r in compute), default=ymax)
    # bandwidth roofs: y = bandwidth * x, up to the highest compute roof drawn
    for roof in bandwidth:
        x_end = min(xmax, top_compute / roof["value"])
        x_start = max(xmin, ymin / roof["value"])
        colour = ROOF_COLOURS.get(roof["name"], "#1f77b4")
        out.append(f'<line class="roof roof-bandwidth" data-roof="{escape(roof["name"])}" x1="{sx(x_start):.1f}" '
                   f'y1="{sy(roof["value"] * x_start):.1f}" x2="{sx(x_end):.1f}" y2="{sy(roof["value"] * x_end):.1f}" '
                   f'stroke="{colour}" stroke-width="2"><title>{escape(roof["label"])}: '
                   f'{si(roof["value"], "B/s")} ({escape(roof["source"])})</title></line>')
        label_x = x_start * 1.3  # at the left end, clear of the points further right
        where = "" if roof["name"] == "hbm" else " (against its own intensity)"
        out.append(f'<text x="{sx(label_x):.1f}" y="{sy(roof["value"] * label_x) - 6:.1f}" fill="{colour}">'
                   f'{escape(roof["label"])} {si(roof["value"], "B/s")}{where}</text>')
    # compute roofs: flat from where the HBM roof meets them
    for roof in compute:
        ridge = roof["value"] / hbm if hbm else xmin
        y = sy(roof["value"])
        out.append(f'<line class="roof roof-compute" data-roof="{escape(roof["name"])}" x1="{sx(max(ridge, xmin)):.1f}" '
                   f'y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="{COMPUTE_COLOUR}" stroke-width="2" '
                   f'stroke-dasharray="{"" if roof["label"] in used else "5 3"}"><title>{escape(roof["label"])}: '
                   f'{si(roof["value"], "FLOP/s")} ({escape(roof["source"])})</title></line>')
        out.append(f'<text x="{LEFT + plot_w + 4}" y="{y + 4:.1f}">{escape(roof["label"])} '
                   f'{si(roof["value"], "FLOP/s")}</text>')
    # points: biggest first so that small kernels stay visible on top
    placed_ids = {id(p) for p in placed}
    total = sum(p["size"] for p in points) or 1.0
    floor = 0
    for point in sorted(points, key=lambda p: -p["size"]):
        radius = 4 + 14 * math.sqrt(point["size"] / total)
        colour = COLOURS.get(point["verdict"], COLOURS["unknown"])
        name = escape(point["label"])
        if id(point) in placed_ids:
            cx, cy = sx(point["x"]), sy(point["y"])
            tip = f'{name}: {point["verdict"]}, {si(point["y"], "FLOP/s")} at {point["x"]:.3g} FLOP/byte'
            style = f'fill="{colour}" stroke="#000000" stroke-width="0.5"'
            kind = "kernel-point"
        else:  # no FLOP (or no bytes): no place on these axes, shown on the floor
            floor += 1
            cx, cy = LEFT + 12 + 26 * (floor - 1), TOP + plot_h - 10
            tip = f"{name}: {point['verdict']}, no floating-point work counted (not placed on the axes)"
            style = f'fill="#ffffff" stroke="{colour}" stroke-width="3"'
            kind = "kernel-point no-flop"
            radius = min(radius, 9)
        out.append(f'<circle class="{kind}" data-kernel="{name}" data-verdict="{escape(point["verdict"])}" '
                   f'cx="{cx:.1f}" cy="{cy:.1f}" r="{radius:.1f}" {style}><title>{tip}</title></circle>')
    # legend of verdicts
    for i, (verdict, colour) in enumerate(COLOURS.items()):
        y = TOP + plot_h - 70 + 16 * i
        out.append(f'<circle cx="{LEFT + plot_w + 10}" cy="{y}" r="5" fill="{colour}"/>'
                   f'<text x="{LEFT + plot_w + 20}" y="{y + 4}">{verdict}</text>')
    out.append("</svg>")
    return "".join(out)


def roofline_html(section: Section) -> str:
    """A standalone page around the chart (for a quick look, and for the browser test)."""
    return ('<!doctype html><html><head><meta charset="utf-8"><title>roofline</title>'
            '<style>body{margin:0}</style></head><body>' + roofline_svg(section) + "</body></html>")
