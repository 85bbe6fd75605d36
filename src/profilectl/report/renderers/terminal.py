"""The document as rich tables and lines on a Console (the caller makes the Console: its width,
colour and soft wrapping are the CLI's business)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from profilectl.report import units
from profilectl.report.document import Document, Finding, Section, TableBlock
from profilectl.report.renderers.common import cell, human_columns, numeric, row_limit, shown_title
from profilectl.screen import assemble, text

WIDE_TERMINAL = 120  # below this, "wide" columns (min/max/std) are left out so names stay readable
NAME_WIDTH = 80


def render(console: Console, document: Document, top: int = 10, header: bool = True,
           skip: tuple[str, ...] = ()) -> None:
    """Every section; `header`: the title and metadata first; `skip`: section keys left out (a
    finished run's own report leaves its story to the closing line)."""
    if header:
        console.print(text(document.title, "bold"))
        for label, value in document.metadata:
            console.print(text(f"  {label}: {value}"))
    for section in document.sections:
        if section.key not in skip:
            _section(console, section, top)


def _section(console: Console, section: Section, top: int) -> None:
    tables = [t for t in section.tables if row_limit(t, top) > 0 and t.rows]
    # a section whose first table carries its title: the table heads it, its lines follow (a legend)
    titled = bool(tables) and (tables[0].title or section.title) == section.title
    if not titled and (section.notes or section.findings):
        console.print(text(section.title, "bold"))
        _lines(console, section)
    for table in tables:
        console.print(rich_table(table, section.title, top, console.width))
    if titled:
        _lines(console, section)


def _lines(console: Console, section: Section) -> None:
    for finding in section.findings:
        _finding(console, finding)
    for note in section.notes:
        console.print(text(f"  {note}"))


def _finding(console: Console, finding: Finding) -> None:
    scope = f" ({finding.scope})" if finding.scope else ""
    console.print(assemble(("  ● ", "yellow"), (f"{finding.verdict}{scope}: ", "bold"), finding.sentence))
    for line in finding.evidence:
        console.print(text(f"      {line}"))
    if finding.next_step:
        console.print(text(f"      next: {finding.next_step}"))


def rich_table(table: TableBlock, fallback_title: str, top: int, width: int) -> Table:
    shown = human_columns(table, wide=width >= WIDE_TERMINAL)
    out = Table(title=text(shown_title(table, fallback_title, top)), title_justify="left")
    for position, index in enumerate(shown):
        column = table.columns[index]
        if numeric(table, index):
            out.add_column(text(column.title), justify="right", no_wrap=True)
        elif position == 0:
            out.add_column(text(column.title), overflow="fold", min_width=24, ratio=1)
        else:
            out.add_column(text(column.title), overflow="fold")
    for row in table.rows[:row_limit(table, top)]:  # every cell is data: never markup, no control character
        out.add_row(*[text(units.shorten(cell(table.columns[i], row[i]), NAME_WIDTH)) for i in shown])
    return out
