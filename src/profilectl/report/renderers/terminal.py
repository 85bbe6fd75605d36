"""The document as rich tables and lines on a Console (the caller makes the Console: its width,
colour and soft wrapping are the CLI's business)."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from profilectl.model import units
from profilectl.model.document import Document, Finding, Section, TableBlock
from profilectl.report.renderers.common import HEADLINE, cell, human_columns, numeric, row_limit, shown_title
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
            console.print(indented(text(f"{label}: {value}"), 2))
    if document.headline:
        console.print(text(HEADLINE, "bold"))
        console.print(indented(text(document.headline), 2))
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
        console.print(indented(text(note), 2))


def indented(line: Text, by: int) -> Padding:
    """A line that keeps its indent when the terminal wraps it (a printed "  note" wraps to column 0)."""
    return Padding(line, (0, 0, 0, by), expand=False)


def _finding(console: Console, finding: Finding) -> None:
    scope = f" ({finding.scope})" if finding.scope else ""
    console.print(assemble(("  ● ", "yellow"), (f"{finding.verdict}{scope}: ", "bold"), finding.sentence))
    for line in finding.evidence:
        console.print(indented(text(line), 6))
    if finding.next_step:
        console.print(indented(text(f"next: {finding.next_step}"), 6))


def rich_table(table: TableBlock, fallback_title: str, top: int, width: int) -> Table:
    """Numbers never wrap; text wraps between words and a word too long for its column (a kernel's
    name) is cut with an ellipsis, never broken mid-word (other formats keep it whole). The "wide"
    columns (min/max/std) show on wide terminals only, and only where the rest still fits."""
    rows = table.rows[:row_limit(table, top)]
    shown = human_columns(table, wide=width >= WIDE_TERMINAL)
    cells = {i: [units.shorten(cell(table.columns[i], row[i]), NAME_WIDTH) for row in rows] for i in shown}
    natural = {i: max([len(table.columns[i].title), *map(len, cells[i])]) for i in shown}
    if sum(natural.values()) + 3 * len(shown) + 1 > width:  # too wide: the wide columns give way first
        shown = [i for i in shown if table.columns[i].show != "wide"]
    out = Table(title=text(shown_title(table, fallback_title, top)), title_justify="left")
    for position, index in enumerate(shown):
        column = table.columns[index]
        if numeric(table, index):
            out.add_column(text(column.title), justify="right", no_wrap=True)
        elif position == 0:
            out.add_column(text(column.title), overflow="ellipsis", min_width=min(24, natural[index]), ratio=1)
        else:
            out.add_column(text(column.title), overflow="ellipsis")
    for number in range(len(rows)):  # every cell is data: never markup, no control character
        out.add_row(*[text(cells[i][number]) for i in shown])
    return out
