"""The document as Markdown: metadata as a list, a heading per section, tables in human units."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from profilectl.report import units
from profilectl.report.document import Document, Finding, TableBlock
from profilectl.report.renderers.common import cell, human_columns, row_limit
from profilectl.screen import visible

# What Markdown would read as markup inside a line: a table's cell bar, emphasis, code, links and
# images, inline HTML, entities, and the backslash itself (CommonMark: any ASCII punctuation can be
# escaped with a backslash, and then stands for itself). An underscore inside a word (sm_90,
# torch_profiler) is never emphasis, so only one at a word's edge is escaped.
_MARKUP = re.compile(r"([\\`*\[\]<>|&~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def escape(value: Any) -> str:
    """Text from a trace as Markdown shows it: literally (`void k<T>(float*, float*)` is neither HTML
    nor emphasis), on one line (control characters and newlines written as escapes)."""
    return _MARKUP.sub(r"\\\1", visible(value))



def md_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The one Markdown table writer: header, rule, escaped cells (numbers in human units)."""
    lines = ["| " + " | ".join(escape(c) for c in columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(escape(units.number(v)) for v in row) + " |" for row in rows]
    return lines + [""]


def table_lines(table: TableBlock, top: int) -> list[str]:
    shown = human_columns(table)
    rows = ([cell(table.columns[i], row[i]) for i in shown] for row in table.rows[:row_limit(table, top)])
    return md_table([table.columns[i].title for i in shown], rows)


def finding_lines(finding: Finding) -> list[str]:
    scope = f" ({finding.scope})" if finding.scope else ""
    lines = [f"- **{escape(finding.verdict)}**{escape(scope)}: {escape(finding.sentence)}"]
    lines += [f"  - {escape(line)}" for line in finding.evidence]
    return lines + ([f"  - next: {escape(finding.next_step)}"] if finding.next_step else [])


def render(document: Document, top: int = 10, header: bool = True) -> str:
    """`header`: the title and metadata first (compare appends a section to its own page without)."""
    lines: list[str] = []
    if header:
        lines += [f"# {escape(document.title)}", ""]
        lines += [f"- **{label}**: {escape(text)}" for label, text in document.metadata]
        lines += [""] if document.metadata else []
    for section in document.sections:
        lines += [f"## {escape(section.title)}", ""]
        for finding in section.findings:
            lines += finding_lines(finding)
        lines += [f"- {escape(note)}" for note in section.notes]
        lines += [""] if section.notes or section.findings else []
        for table in section.tables:
            if row_limit(table, top) > 0 and table.rows:
                if table.title and table.title != section.title:
                    lines += [f"### {escape(table.title)}", ""]
                lines += table_lines(table, top)
    return "\n".join(lines)
