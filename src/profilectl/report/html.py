"""A summary's self-contained HTML report (the renderer is renderers/html.py, over its document)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profilectl.read.summary import Summary


def to_html(summary: "Summary", top: int = 15) -> str:
    from profilectl.report.renderers import html
    from profilectl.report.sections import build_document
    return html.render(build_document(summary), top)
