"""Progress for the long steps a user would otherwise wait through in silence (an image build,
reading a large trace): a rich spinner with the step's latest line and the time spent, drawn on
stderr and erased when the step ends.

Only on a terminal: when stderr is not a TTY (CI logs, `| tee`, `2>file`) or the output is JSON,
nothing is drawn at all, so logs keep results, never redraws.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from profilectl.report.units import shorten

Update = Callable[[str], None]
DETAIL_WIDTH = 60  # the step's latest line, cut to fit beside the label on an 80-column terminal


def shown(stream: object = None) -> bool:
    """Whether progress is drawn on this stream (stderr by default): a terminal that is not dumb."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def _one_line(text: str) -> str:
    return shorten(" ".join(text.split()), DETAIL_WIDTH)


@contextmanager
def activity(label: str, quiet: bool = False) -> Iterator[Update]:
    """`with activity("building profilectl:local") as update: ... update(latest_line)`."""
    if quiet or not shown():
        yield lambda _text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from profilectl.screen import console as data_console
    from profilectl.screen import visible
    console = data_console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
               TextColumn("[dim]{task.fields[detail]}", markup=True))
    with Progress(*columns, console=console, transient=True, refresh_per_second=8) as bar:
        task = bar.add_task(visible(label), total=None, detail="")  # a file's name is data
        bar.refresh()  # drawn at once: a step worth a spinner should never start in silence

        def update(text: str) -> None:
            from rich.markup import escape
            bar.update(task, detail=escape(visible(_one_line(text))))

        yield update
