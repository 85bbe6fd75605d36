"""screen.py: names from a trace shown as data on a terminal (no markup, no control character)."""

import io

from profilectl.report.renderers.markdown import escape
from profilectl.screen import console, text, visible

HOSTILE = "k<[/bold]>:cat:\x1b]52;c;eA==\x07\x1b[2J\x9b\u202e\n\tend"


def test_every_control_character_is_an_escape():
    assert visible(HOSTILE) == "k<[/bold]>:cat:\\u001b]52;c;eA==\\u0007\\u001b[2J\\u009b\\u202e\\u000a\\u0009end"
    assert visible("a\nb\tc\rd", lines=True) == "a\nb\tc\\u000dd"  # a block keeps its lines, not a carriage return
    assert visible("plain µs → name") == "plain µs → name"


def test_the_console_reads_no_markup_and_lets_no_control_through():
    out = io.StringIO()
    shown = console(file=out, width=200, force_terminal=True, color_system="standard")
    shown.print(HOSTILE)
    shown.print(text(HOSTILE, "bold"))
    from rich.text import Text
    shown.print(Text("raw\x1b]52;c;eA==\x07"))  # a Text built elsewhere: escaped by the last guard
    written = out.getvalue()
    assert "k<[/bold]>:cat:" in written and "\x1b]52" not in written and "\x07" not in written
    assert "\x9b" not in written and "\u202e" not in written and "\x1b[2J" not in written
    assert "\x1b[1m" in written  # the console's own styles still reach the terminal


def test_markdown_escapes_its_own_markup():
    assert escape("void k<[/b]>(float*, a_b) | __x__") == "void k\\<\\[/b\\]\\>(float\\*, a_b) \\| \\_\\_x\\_\\_"
