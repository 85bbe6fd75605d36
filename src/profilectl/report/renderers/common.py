"""What the human renderers share: which columns and rows people see, and cells in human units."""

from __future__ import annotations

from typing import Any

from profilectl.model import units
from profilectl.model.document import Column, TableBlock


HEADLINE = "Where the time goes"  # how every human format heads Document.headline


def human_columns(table: TableBlock, wide: bool = True) -> list[int]:
    """Indices of the columns people see (every one but machine-only; `wide` ones on wide screens)."""
    keep = ("always", "human", "wide") if wide else ("always", "human")
    return [i for i, c in enumerate(table.columns) if c.show in keep]


def machine_columns(table: TableBlock) -> list[int]:
    return [i for i, c in enumerate(table.columns) if c.show != "human"]


def row_limit(table: TableBlock, top: int) -> int:
    """Rows people see: the table's own count where it has one, else the report's --top."""
    return top if table.shown is None else table.shown


def shown_title(table: TableBlock, fallback: str, top: int) -> str:
    limit = row_limit(table, top)
    title = table.title or fallback
    return title + (f" (top {limit} of {len(table.rows)})" if len(table.rows) > limit else "")


def cell(column: Column, value: Any) -> str:
    return units.human(column.unit, value)


def numeric(table: TableBlock, index: int) -> bool:
    """A column of numbers (right-aligned): any value is an int or a float."""
    return any(isinstance(row[index], (int, float)) and not isinstance(row[index], bool) for row in table.rows)
