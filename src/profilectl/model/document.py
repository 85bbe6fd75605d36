"""The report document: the one thing every renderer sees.

A Summary (what was measured) becomes a Document once: an ordered tuple of sections, each made of
typed tables (columns with a machine name, a human title, a unit and how the column aggregates),
findings (a verdict with the evidence that carries it), notes and charts. Renderers (terminal,
Markdown, HTML, CSV, JSON, Parquet, SQLite) are generic over these types: a new analysis is one
function `Summary -> Section | None`, never one writer per format.

This module holds types only; it imports nothing from rendering or loading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# How a column's values combine across rows or ranks: renderers and exports use it for totals and
# for merging; "none" is a label or an identifier.
Aggregate = Literal["sum", "mean", "weighted_mean", "max", "min", "first", "none"]
# Units a renderer knows how to show ("ns" -> 1.234 ms, "bytes" -> 4.2 GiB, "percent" -> 12.3 %);
# None for text. Machine formats keep raw numbers in columns named with the unit (total_ns).
Unit = Literal["ns", "s", "bytes", "bytes_per_s", "flop", "flop_per_s", "flop_per_byte", "percent",
               "count", "W", "J", "ratio", "celsius", "MHz"]
# Which formats show a column: every one; human ones on wide terminals only (min/max/std of a kernel);
# machine formats only (CSV, JSON, Parquet, SQLite, the API: raw detail people need not read); or
# human formats only (a label made for reading, such as a step's "warm-up" mark).
Show = Literal["always", "wide", "machine", "human"]


@dataclass(frozen=True)
class Column:
    """One column of a report table: machine name, human title, unit, how it aggregates, which formats show it."""
    name: str  # machine name, unit in it where there is one: "total_ns", "percent", "calls"
    title: str  # human heading: "Total", "% GPU", "Calls"
    unit: Unit | None = None
    aggregate: Aggregate = "none"
    show: Show = "always"


@dataclass(frozen=True)
class TableBlock:
    """A report table: its stable key (the file and SQL table name), columns and rows, and how many rows people see."""
    key: str  # stable name for files and SQL: "kernels" -> kernels.csv, kernels.parquet, table kernels
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    title: str | None = None
    # rows shown by human formats (terminal, md, html); machine formats keep all. None: the report's
    # --top; 0: a machine-only table (CSV, Parquet, SQLite, the API), not shown to people
    shown: int | None = None


@dataclass(frozen=True)
class Finding:
    """A conclusion is a claim: the verdict, its cause, the numbers that carry it, the next step."""
    verdict: str  # a stable identifier: "launch-bound", "host-bound", "straggler", "memory-bound"
    sentence: str  # one line a user reads first
    evidence: tuple[str, ...] = ()  # the lines with the numbers that carry the verdict
    next_step: str | None = None  # the one thing a GPU engineer would do next
    scope: str | None = None  # what it covers: "rank 1", "steps 5-20 (steady state)", "whole run"


@dataclass(frozen=True)
class Chart:
    """A chart of one table of the same section: its kind, the columns it plots and chart-specific data."""
    kind: Literal["bar", "share", "busy_timeline", "steps", "line", "loglog_scatter"]
    title: str
    table: str  # the TableBlock.key it plots, in the same section
    x: str | None = None  # column names
    y: str | None = None
    size: str | None = None  # point size (scatter)
    label: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # chart-specific data (roofs of a roofline, axis limits)


@dataclass(frozen=True)
class Section:
    """One part of the report (kernels, timeline, diagnosis, ...): its tables, findings, notes and charts."""
    key: str  # stable: "kernels", "timeline", "diagnosis", "roofline"
    title: str
    tables: tuple[TableBlock, ...] = ()
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    charts: tuple[Chart, ...] = ()


@dataclass(frozen=True)
class Document:
    """The whole report every renderer takes: a title, the metadata, the one-line headline and the sections in order."""
    title: str
    metadata: tuple[tuple[str, str], ...]  # (label, value): date, host, GPU, versions, command
    sections: tuple[Section, ...]
    schema_version: int = 2
    headline: str | None = None  # where the time goes, in one line: what every format says first
