"""Renderers: a Document (model/document.py) in one format. Generic over sections: none of them
names a section, a table or a column; they read the types.

    terminal.render(console, document, top)     rich, to a Console the caller made
    markdown.render(document, top)              text
    html.render(document, top)                  one self-contained page (charts: charts.py)
    machine.csv_tables / json_text / write_parquet / write_sqlite   every row, raw numbers
"""

from __future__ import annotations

from typing import Any

from profilectl.model.document import Document

TEXT_FORMATS = ("md", "html", "json", "csv")


def render(document: Document, fmt: str, top: int = 10, **options: Any) -> str:
    """The document as text in one of TEXT_FORMATS (the terminal renders to a Console: terminal.py;
    Parquet and SQLite are files: machine.py)."""
    if fmt == "md":
        from profilectl.report.renderers import markdown
        return markdown.render(document, top)
    if fmt == "html":
        from profilectl.report.renderers import html
        return html.render(document, top, **options)
    if fmt == "json":
        from profilectl.report.renderers import machine
        return machine.json_text(document)
    if fmt == "csv":
        from profilectl.report.renderers import machine
        return machine.to_csv(machine.csv_tables(document))
    raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(TEXT_FORMATS)}")
