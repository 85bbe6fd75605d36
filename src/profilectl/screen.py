"""What reaches a terminal: names and strings from a trace are shown as data, never obeyed.

A kernel, a file or a workload is named by whoever wrote the trace. Two things in such a name must
never act on the reader's terminal or on rich:
- control characters: ESC starts sequences that set the clipboard (OSC 52), clear the screen,
  retitle the window or move the cursor; C1 controls (U+0080..U+009F) do the same on terminals that
  take them; bidirectional overrides reorder what is shown. `visible()` writes each as an escape
  (`\\u001b`, `\\u009b`, `\\u202e`), so the name stays readable and nothing is lost.
- rich markup: `void kernel<[/bold]>(float*)` is a closing tag to rich (a MarkupError traceback),
  `:cat:` an emoji code. The one Console (`console()`) parses no markup and no emoji codes in any
  string it is given; styles come only from Text objects built here (`text()`), never from markup
  strings built from data.

Every renderer that prints to a terminal (report's tables, query, env-check, ls, compare, the plan,
one-line errors) goes through this module. Files written for programs or other viewers escape their
own way (HTML entities, CSV quoting, Markdown backslashes: report/renderers/).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.text import Text

# C0 controls, DEL, C1 controls, and the bidirectional marks, embeddings, overrides and isolates
_OTHERS = r"\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x1f{_OTHERS}]")
_CONTROL_BUT_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # keeps tab (\x09) and newline (\x0a)


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"  # as JSON and Python write it: JSON printed here stays JSON


def visible(value: Any, lines: bool = False) -> str:
    """`value` as text whose control characters are shown as escapes, never sent to the terminal.
    `lines`: newlines and tabs stay (a block of text of profilectl's own with data inside)."""
    text = value if isinstance(value, str) else str(value)
    return (_CONTROL_BUT_LINES if lines else _CONTROL).sub(_escaped, text)


def text(value: Any, style: str = "") -> "Text":
    """A rich Text of `value` as data (escaped, never parsed as markup), in `style`."""
    from rich.text import Text
    return Text(visible(value), style=style)


def assemble(*parts: tuple[Any, str] | Any) -> "Text":
    """One line from pieces, each `value` or `(value, style)`; every value shown as data."""
    from rich.text import Text
    out = Text()
    for part in parts:
        value, style = part if isinstance(part, tuple) else (part, "")
        out.append(visible(value), style=style)
    return out


def console(**options: Any) -> "Console":
    """The Console every terminal renderer uses: no markup, no emoji codes, no highlighting, and no
    control character from a string or a Text reaching the terminal (see the module)."""
    from rich.console import Console
    from rich.segment import Segment

    class DataConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> "Text":
            kwargs.update(markup=False, emoji=False)
            return super().render_str(visible(text, lines=True), **kwargs)

        def render(self, renderable: "RenderableType",
                   options: "ConsoleOptions | None" = None) -> "Iterable[Segment]":
            # The last guard: a Text built elsewhere from data is escaped here (its width may then
            # be off by the escapes; the renderers above build theirs with text()).
            for segment in super().render(renderable, options):
                if segment.control is None and _CONTROL_BUT_LINES.search(segment.text):
                    yield Segment(visible(segment.text, lines=True), segment.style, segment.control)
                else:
                    yield segment

    options.setdefault("highlight", False)
    return DataConsole(markup=False, emoji=False, **options)


def write(chunks: Iterable[str] | str, stream: Any = None) -> None:
    """Text for stdout (CSV, Markdown, HTML printed rather than written to -o): on a terminal its
    control characters are escaped like a table's; into a pipe or a file it goes as it is."""
    stream = stream if stream is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    terminal = bool(isatty and isatty())
    for chunk in [chunks] if isinstance(chunks, str) else chunks:
        stream.write(visible(chunk, lines=True) if terminal else chunk)
