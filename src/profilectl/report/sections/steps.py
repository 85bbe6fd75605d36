"""The steady-state step time of a Python workload, beside the process's wall time."""

from __future__ import annotations

import dataclasses

from profilectl.model.document import Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import Summary, step_time_line


def build(summary: Summary) -> Section | None:
    steps = summary.step_time
    if steps is None:
        return None
    flat = {k: v for k, v in dataclasses.asdict(steps).items() if not isinstance(v, (tuple, list))}
    table = table_of("step_time", [flat], title="Step time", shown=0)  # the line says it to people
    return Section(key="step_time", title="Step time", notes=(step_time_line(summary) or "",), tables=(table,))
