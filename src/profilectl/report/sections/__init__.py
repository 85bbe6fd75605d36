"""The report's sections, in report order: each module holds one `build(summary) -> Section | None`.

Adding a section to every format (terminal, Markdown, HTML, CSV, JSON, Parquet, SQLite, the Python
API) is one module here and one line in ORDER (BUILDERS is their `build` functions, in that order);
renderers never name a section.
"""

from __future__ import annotations

import importlib
from typing import Callable

from profilectl.model.document import Document, Section
from profilectl.read.summary import Summary, metadata_items

Builder = Callable[[Summary], "Section | None"]

# The section modules, in report order; each holds `build(summary) -> Section | None`.
ORDER = (
    "overview",  # the SLURM job; how kernel times were measured (where the time goes: Document.headline)
    "diagnosis",  # what users read first: why the GPU waits, the straggler, what failed first
    "run",  # the run's story: wall time, fallbacks, status message
    "timing",
    "steps",  # steady-state step time
    "power",
    "kernels",
    "api",
    "copies",
    "operators",
    "annotations",  # record_function ranges and ProfilerStep#N: CPU time and the GPU time launched inside
    "counters",
    "roofline",  # per kernel: which roof limits it, how far below it (counters --set roofline)
    "operator_roofline",  # per operator, from the shapes a torch trace recorded (trace --shapes)
    "memory",  # torch's memory history: the peak and what held it, an out-of-memory error (trace --memory)
    "pc_sampling",
    "timeline",
    "collective_calls",  # each collective: size, bandwidths, exposed or hidden, who arrived last
    "ranks",
    "notes",
)
BUILDERS: list[Builder] = [importlib.import_module(f"{__name__}.{name}").build for name in ORDER]


def title(summary: Summary) -> str:
    """The tool and what was read: the run (its id, service, backend, status), the job, or the files."""
    from pathlib import PurePath
    run_story, job = summary.run, summary.job
    if run_story:
        name = PurePath(summary.source.path).name
        return f"profilectl — {name}: {run_story.service} via {run_story.backend} — {run_story.status}"
    if job:
        return f"profilectl — SLURM job {job.job_id}.{job.step_id} — {job.status}"
    return f"profilectl — {summary.source.kind}: {summary.source.path}"


def build_document(summary: Summary, builders: list[Builder] | None = None) -> Document:
    """The Summary as the document every renderer sees; sections with nothing to say are left out."""
    from profilectl.report.sections.overview import where_time_goes
    built = (builder(summary) for builder in (BUILDERS if builders is None else builders))
    return Document(title=title(summary), metadata=tuple(metadata_items(summary)),
                    sections=tuple(section for section in built if section is not None),
                    headline=where_time_goes(summary))
