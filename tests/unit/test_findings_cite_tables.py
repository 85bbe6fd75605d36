"""A finding's numbers are its table's numbers (issue 32): every steady-state finding, straggler
and idle-cause figure a report prints is checked against the row of the table it rests on, in the
same document (terminal, Markdown, HTML and JSON all render this document), over every trace with a
diagnosis in tests/fixtures, the real corpus included."""

from __future__ import annotations

import json
import statistics

import pytest

from profilectl.report.load import load
from profilectl.report.sections import build_document
from profilectl.report.units import duration_ns
from support import FIXTURES

CASES = sorted([*(FIXTURES / "diagnosis").iterdir(), *(FIXTURES / "nvidia-h200-ddp").iterdir(),
                *(FIXTURES / "kineto").glob("*.gz"), *(FIXTURES / "hta").glob("*.gz"), *(FIXTURES / "nsys").glob("*.sqlite"),
                FIXTURES / "xla-trace/aoberai.trace.json.gz", FIXTURES / "nvidia-h200/torch_profiler_trace.json",
                *(FIXTURES / t["path"] for t in json.loads((FIXTURES / "real/corpus.json").read_text())["traces"]
                  if "members" not in t and t["path"].startswith("real/"))])


def table(section, key):
    block = next((t for t in section.tables if t.key == key), None)
    if block is None:
        return []
    names = [c.name for c in block.columns]
    return [dict(zip(names, row)) for row in block.rows]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_every_figure_of_a_finding_is_in_its_table(path):
    document = build_document(load(path))
    section = next((s for s in document.sections if s.key == "diagnosis"), None)
    if section is None or not section.findings:
        assert load(path).timeline is None or load(path).diagnosis is None or not load(path).diagnosis.findings
        return
    steady = {row["rank"]: row for row in table(section, "steady_state")}
    causes = [row for row in table(section, "idle_causes") if row["scope"] == "steady"]
    waits = table(section, "rank_waits")
    checked = 0
    for finding in section.findings:
        first = finding.evidence[0] if finding.evidence else ""
        if finding.scope.startswith("rank ") and finding.verdict not in ("straggler", "failure"):
            rank = finding.scope.split(",")[0].removeprefix("rank ")
            row = steady[rank]
            assert f"GPU idle {duration_ns(row['idle_ns'])} of {duration_ns(row['span_ns'])}" in first, (first, row)
            assert f"busy {row['busy_percent']:.0f} %" in first
            checked += 1
        elif "mean of" in finding.scope:
            busy = [row["busy_percent"] for row in steady.values()]
            assert f"GPU busy {statistics.fmean(busy):.0f} % on average (ranks {min(busy):.0f}-{max(busy):.0f} %)" \
                in first, (first, busy)
            exposed = [row["exposed_percent"] for row in steady.values()]
            if any("exposed communication" in line for line in finding.evidence):
                line = next(line for line in finding.evidence if line.startswith("exposed communication"))
                assert f"{statistics.fmean(exposed):.0f} % of the steady span" in line, (line, exposed)
            checked += 1
        elif first.startswith(next(iter(steady.values()), {}).get("scope", "\0")) and len(steady) == 1:
            row = next(iter(steady.values()))
            assert f"GPU idle {duration_ns(row['idle_ns'])} of {duration_ns(row['span_ns'])}" in first, (first, row)
            assert f"busy {row['busy_percent']:.0f} %" in first
            if len(finding.evidence) > 1 and finding.evidence[1].startswith("idle time by cause: "):
                for cause in causes[:2]:
                    assert f"{cause['title']} {duration_ns(cause['idle_ns'])} ({cause['percent']:.0f} %" \
                        in finding.evidence[1], (finding.evidence[1], cause)
            checked += 1
        elif finding.verdict == "straggler" and waits:
            for line in finding.evidence:
                if line.startswith("rank ") and "median per steady step" in line:
                    rank = line.split(":")[0].removeprefix("rank ")
                    mine = [w for w in waits if w["rank"] == rank]
                    assert f"{duration_ns(statistics.median(w['collective_ns'] for w in mine))} in collectives" in line
                    assert f"{duration_ns(statistics.median(w['own_ns'] for w in mine))} of its own" in line
                    checked += 1
    assert checked, [f.sentence for f in section.findings]


def test_a_single_ranks_steady_busy_is_its_steps_tables(tmp_path):
    """The steady verdict's busy share is the Steps table's steady rows added up (busy clipped to each
    step's window): the issue's 'gpu-bound 100 %' against 'Steps: 11 µs busy' cannot happen again."""
    for path in (FIXTURES / "diagnosis/item", FIXTURES / "kineto/torch1.9_resnet50_worker0.pt.trace.json.gz",
                 FIXTURES / "real/tracelens/inference/sglang_decode_capture_bs_32_rank0.json.gz"):
        summary = load(path)
        steps = [s for s in summary.timeline.steps if s.steady]
        rank = summary.diagnosis.ranks[0]
        assert rank.steady_span_ns == sum(s.wall_ns for s in steps)
        assert rank.steady_busy_ns == sum(s.gpu_busy_ns for s in steps), path.name
