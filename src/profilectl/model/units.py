"""Human units, one formatter for every report read by people (terminal table, Markdown, HTML).

One number style everywhere: durations get the unit that suits each value (ns, µs, ms, s) and four
significant digits, trailing zeros kept so a column reads alike ("191.0 ms" beside "190.6 ms", a
timing's std of 3 ms "3.012 ms", never "0.0"); whole nanoseconds and counts are plain digits; a
space before every unit ("12.3 %", "4.2 GiB"); no thousands separators anywhere, so a number copies
as it is (the rule docs/usage.md states). JSON and CSV keep raw numbers in columns named by their unit
(`total_ns`, `median_s`): this module decides how a column named so is shown.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"  # the tool does not report this value (ncu: no per-launch min/max)
SIGNIFICANT = 4
_UNITS = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))  # smallest first


def _digits(value: float) -> str:
    """Four significant digits, trailing zeros kept, without an exponent or separators: 190.64 ->
    '190.6', 191 -> '191.0', 3.0121 -> '3.012', 1234.5 -> '1234' (1000 and up: whole)."""
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if value == 0:
        return "0"
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
    text = f"{value:.{max(decimals, 0)}f}"
    if abs(float(text)) >= 10 ** (SIGNIFICANT - decimals) and decimals > 0:  # 9.9996 rounds to 10.000
        text = f"{value:.{decimals - 1}f}"
    return text if decimals <= 6 else f"{value:.3g}"


def duration_ns(value: float | None, missing: str = MISSING) -> str:
    """A duration in nanoseconds, in the largest unit it reaches: 51821441.0 -> '51.82 ms'."""
    if value is None or not math.isfinite(value):
        return missing
    magnitude = abs(value)
    index = 0
    while index + 1 < len(_UNITS) and magnitude >= _UNITS[index + 1][1]:
        index += 1
    unit, scale = _UNITS[index]
    text = _whole(value) if index == 0 else _digits(value / scale)  # a nanosecond is the finest grain
    # 999.96 µs rounds to "1000 µs": say "1.000 ms" instead
    if index + 1 < len(_UNITS) and abs(float(text)) >= 1000:
        unit, scale = _UNITS[index + 1]
        text = _digits(value / scale)
    return f"{text} {unit}"


def _whole(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1 or value == 0 else _digits(value)


def duration_s(value: float | None, missing: str = MISSING) -> str:
    """A duration in seconds, shown like duration_ns: 0.003012 -> '3.012 ms'."""
    if value is None or not math.isfinite(value):
        return missing
    return duration_ns(value * 1e9, missing)


def shorten(name: str, width: int) -> str:
    """A long name (a C++ kernel's) cut to `width` characters, the cut marked with an ellipsis."""
    return name if len(name) <= width else name[: width - 1] + "…"


def number(value: Any, missing: str = MISSING) -> str:
    """A count or a counter value: integers as plain digits, fractions to four significant digits."""
    if value is None or value == "":
        return missing
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) or value == int(value):
        return str(int(value))
    return _digits(value)


def percent(value: float | None, missing: str = MISSING) -> str:
    if value is None:
        return missing
    return f"{value:.1f} %"


def speedup(value: float | None) -> str:
    """A ratio of times, A over B (compare): '1.50×'; '-' where there is none."""
    return f"{value:.2f}×" if value else "-"


def si(value: float, unit: str) -> str:
    """Decimal prefixes, as datasheets quote rates: si(1.2e15, 'FLOP/s') -> '1.2 PFLOP/s'."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def watts(value: float | None, missing: str = MISSING) -> str:
    return missing if value is None else f"{value:.1f} W"


def joules(value: float | None, missing: str = MISSING) -> str:
    if value is None:
        return missing
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}" if value / scale < 100 else f"{value / scale:.1f} {unit}"
    return f"{value:.1f} J"


def size(value: int | float | None, missing: str = MISSING) -> str:
    if value is None:
        return missing
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{int(value)} B"


# How a document column's unit (model/document.py) is shown to people; numbers without one: number().
_BY_UNIT = {"ns": duration_ns, "s": duration_s, "percent": percent, "W": watts, "J": joules, "bytes": size,
            "celsius": lambda v, missing=MISSING: f"{v:.0f} °C",
            "MHz": lambda v, missing=MISSING: f"{v:.0f} MHz",
            "bytes_per_s": lambda v, missing=MISSING: si(v, "B/s"), "flop_per_s": lambda v, missing=MISSING: si(v, "FLOP/s"),
            "flop": lambda v, missing=MISSING: si(v, "FLOP"),
            "flop_per_byte": lambda v, missing=MISSING: f"{v:.3g} FLOP/B"}


def human(unit: str | None, value: Any, missing: str = MISSING) -> str:
    """A value of a document column as people read it, by the column's unit."""
    if value is None or value == "":
        return missing
    if isinstance(value, bool):
        return "yes" if value else ""
    show = _BY_UNIT.get(unit or "")
    if show is not None and isinstance(value, (int, float)):
        return show(value, missing)
    return number(value, missing)


def unit_of(column: str) -> str | None:
    """The unit a machine column name carries by convention: total_ns, median_s, busy_percent, ..."""
    for suffix, unit in (("_ns", "ns"), ("_s", "s"), ("_percent", "percent"), ("_pct", "percent"),
                         ("_bytes", "bytes"), ("_w", "W"), ("_j", "J"), ("_c", "celsius"), ("_mhz", "MHz")):
        if column.endswith(suffix):
            return unit
    return "percent" if column == "percent" else None


def cell(column: str, value: Any, missing: str = MISSING) -> str:
    """A value of a column named by its unit, as people read it: `*_ns` and `*_s` durations,
    `percent`/`*_percent` shares, numbers with separators, text as it is."""
    if value is None or value == "":
        return missing
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if column.endswith("_ns"):
            return duration_ns(value, missing)
        if column.endswith("_s"):
            return duration_s(value, missing)
        if column == "percent" or column.endswith("_percent"):
            return percent(value, missing)
    return number(value, missing)


def heading(column: str) -> str:
    """The heading of a unit-named column once its values carry their unit: total_ns -> total."""
    for suffix in ("_ns", "_s"):
        if column.endswith(suffix) and len(column) > len(suffix):
            column = column[: -len(suffix)]
            break
    if column == "percent":
        return "% time"
    if column.endswith("_percent"):
        return column[: -len("_percent")].replace("_", " ") + " %"
    return column.replace("_", " ")
