"""GPU power over time as one self-contained SVG (no script, no external font or file), for the HTML
report to place: one line per GPU from the summary's downsampled series (at most MAX_POINTS each).

    from profilectl.report.power_chart import power_chart
    svg = power_chart(summary.power)  # "" when the run sampled no power
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

from profilectl.telemetry.model import PowerSummary

MAX_POINTS = 300
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def downsample(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most `limit` points: means of consecutive groups of equal size (order kept)."""
    if len(points) <= limit:
        return list(points)
    out = []
    for k in range(limit):
        group = points[k * len(points) // limit:(k + 1) * len(points) // limit]
        out.append((sum(t for t, _ in group) / len(group), sum(w for _, w in group) / len(group)))
    return out


def _nice_top(value: float) -> float:
    """The axis end: a round multiple of a power of ten at or above `value`."""
    if value <= 0:
        return 1.0
    scale = 10 ** len(str(int(value))) / 10 if value >= 1 else 10.0 ** math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def power_chart(power: PowerSummary | None, width: int = 720, height: int = 240) -> str:
    series = [(gpu.gpu, list(gpu.series)) for gpu in (power.gpus if power else ()) if gpu.series]
    if power is None or not series:
        return ""
    return power_svg(series, power.source, width, height)


def power_svg(raw: Sequence[tuple[object, Sequence[tuple[float, float]]]], source: str, width: int = 720,
              height: int = 240, what: str = "GPU power", unit: str = "W", series_name: str = "GPU {}",
              scale: float = 1.0, x_what: str = "time (s)") -> str:
    """The chart of (GPU, [(time s, watts)]) series, each downsampled to MAX_POINTS. Other series
    (GPU memory over time) name their quantity (`what`, the chart's title and label: "GPU memory over
    time"), its axis unit (`unit`), their lines (`series_name`) and the number their values are
    divided by for the axis (`scale`: 2**30 for GiB)."""
    series = [(gpu, downsample(points)) for gpu, points in raw if points]
    if not series:
        return ""
    left, right, top, bottom = 56, 16, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    t_end = max((points[-1][0] for _, points in series), default=0.0) or 1.0
    w_top = _nice_top(max(w for _, points in series for _, w in points) / scale) * scale

    def x(t: float) -> float:
        return left + plot_w * t / t_end

    def y(w: float) -> float:
        return top + plot_h * (1 - w / w_top)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(what)} over time" font-family="sans-serif" '
             'font-size="11">',
             f"<title>{escape(what)} over time ({escape(source)})</title>",
             f'<text x="{left}" y="16" font-size="13">{escape(what)} ({escape(unit)}) over {escape(x_what)}, {escape(source)}</text>',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for k in range(5):  # horizontal grid and watt labels
        watts = w_top * k / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(watts):.1f}" y2="{y(watts):.1f}" '
                     f'stroke="#e5e5e5"/><text x="{left - 6}" y="{y(watts) + 4:.1f}" text-anchor="end">'
                     f"{watts / scale:.4g}</text>")
    for k in range(5):
        t = t_end * k / 4
        parts.append(f'<text x="{x(t):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{t:.3g}</text>')
    for index, (gpu, points) in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x(t):.1f},{y(w):.1f}" for t, w in points)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
                     f"<title>{escape(series_name.format(gpu))}</title></polyline>")
        if len(series) > 1:
            parts.append(f'<text x="{left + plot_w - 4}" y="{top + 14 + 13 * index}" text-anchor="end" '
                         f'fill="{colour}">{escape(series_name.format(gpu))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
