"""Counter listings as each tool and release prints them: the names a GPU can collect.

Every layout below was read from the printing code of the release (facts, not copies; the sources
are named per pattern) and is recognised by its own shape, so one parser serves a machine whatever
its ROCm release:

rocprofv3 -L / --list-metrics / --list-avail
  A  ROCm 6.2, 6.3   "gpu-agent1:\tSQ_WAVES" then Description:/Block:/Dimensions: lines
                     (rocprofiler-sdk rocm-6.2.0 source/lib/rocprofiler-sdk-tool/tool.cpp, list_metrics)
  B  ROCm 6.4        "gpu-agent:1" before every counter, then "Name:\tSQ_WAVES"
                     (source/bin/rocprofv3_avail.py, generate_output, at the 6.4 branch point)
  C  ROCm 7.0 branch "counter_name        : SQ_WAVES" (rocm-systems release/rocm-rel-7.0,
                     projects/rocprofiler-sdk/source/bin/rocprofv3_avail_module/avail.py)
  D  7.x mainline    "Counter_Name        :\tSQ_WAVES" (develop since 2025-07; also the layout of
                     the documented sample tests/fixtures/rocprofv3-docs/list-avail.txt)
rocprofv3-avail list --pmc (7.0+): a "PMC:" line, then the names in columns
legacy rocprof --list-basic/--list-derived (v1, bin/rpl_run.sh -> test/tool/tool.cpp):
                     "  gpu-agent0 : TCC_HIT[0-15] : description"
rocprofv2 --list-counters (src/tools/ctrl.cpp): "  gfx1100:0 : GL2C_HIT : description"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"([A-Za-z_][\w.]*)"
ROCPROFV3_PATTERNS = (
    ("rocprofv3 6.2/6.3", re.compile(rf"^gpu-agent\d+:\t{_NAME}\s*$")),
    ("rocprofv3 6.4", re.compile(rf"^Name:\t{_NAME}\s*$")),
    ("rocprofv3 7.0", re.compile(rf"^counter_name\s+:\s*{_NAME}\s*$")),
    ("rocprofv3 7.x", re.compile(rf"^Counter_Name\s+:\s*{_NAME}\s*$")),
)
ROCPROF_V1 = re.compile(rf"^\s+gpu-agent\d+\s*:\s*{_NAME}(?:\[[^\]]*\])?\s*:")
ROCPROF_V2 = re.compile(rf"^\s+gfx[0-9a-f]+:\d+\s*:\s*{_NAME}\s*:")
_PMC_HEADER = re.compile(r"^PMC\s*:\s*(.*)$")
_AVAIL_HEADER = re.compile(r"^(GPU|Name|NAME|PMC)\s*:")


@dataclass(frozen=True)
class CounterListing:
    """What a listing command said: the names, or why there are none."""
    command: str  # the command as a user would type it
    names: frozenset[str] = frozenset()
    layout: str | None = None  # which known layout matched
    ran: bool = True  # False: the command failed or could not start
    first_line: str = ""  # of an output no layout matched, for the note

    @property
    def problem(self) -> str | None:
        """Why the names cannot be validated, in words for the plan's notes; None when they can."""
        if self.names:
            return None
        if not self.ran:
            return f"could not list this GPU's counters (`{self.command}` failed); names not validated before the run"
        if self.first_line:
            return (f"`{self.command}` printed a counter list in a layout profilectl does not know (first line: "
                    f"{self.first_line[:80]!r}); names not validated before the run")
        return f"`{self.command}` listed no counters for this GPU; names not validated before the run"


def _first_meaningful_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def rocprofv3(text: str, command: str = "rocprofv3 -L") -> CounterListing:
    """Any rocprofv3 -L layout (A-D above); a listing of several GPUs gives the union."""
    for layout, pattern in ROCPROFV3_PATTERNS:
        names = {m.group(1) for line in text.splitlines() if (m := pattern.match(line))}
        if names:
            return CounterListing(command, frozenset(names), layout)
    return CounterListing(command, first_line=_first_meaningful_line(text))


def rocprofv3_avail(text: str, command: str = "rocprofv3-avail list --pmc") -> CounterListing:
    """`rocprofv3-avail list --pmc`: a PMC header per GPU, then names in columns."""
    names: set[str] = set()
    in_pmc = False
    for line in text.splitlines():
        header = _PMC_HEADER.match(line.strip())
        if header:
            in_pmc = True
            names.update(header.group(1).split())
            continue
        if _AVAIL_HEADER.match(line.strip()):
            in_pmc = False
            continue
        if in_pmc:
            names.update(token for token in line.split() if re.fullmatch(_NAME, token))
    if names:
        return CounterListing(command, frozenset(names), "rocprofv3-avail list")
    return CounterListing(command, first_line=_first_meaningful_line(text))


def rocprof_legacy(text: str, command: str) -> CounterListing:
    """rocprof v1 (--list-basic, --list-derived) or rocprofv2 (--list-counters) output."""
    for layout, pattern in (("rocprof v1", ROCPROF_V1), ("rocprofv2", ROCPROF_V2)):
        names = {m.group(1) for line in text.splitlines() if (m := pattern.match(line))}
        if names:
            return CounterListing(command, frozenset(names), layout)
    return CounterListing(command, first_line=_first_meaningful_line(text))


def union(listings: list[CounterListing]) -> CounterListing:
    """Several commands of one tool (v1's basic and derived lists) as one listing."""
    understood = [listing for listing in listings if listing.names]
    if not understood:
        return next((listing for listing in listings if listing.first_line), listings[0])
    return CounterListing(" + ".join(f"`{listing.command}`".strip("`") for listing in understood),
                          frozenset().union(*(listing.names for listing in understood)),
                          "; ".join(dict.fromkeys(listing.layout or "" for listing in understood)))
