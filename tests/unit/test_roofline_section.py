"""The roofline section and its chart, built from the real H100 capture (tests/fixtures/nvidia-h100-roofline):
typed columns with units, findings in order of GPU time, one chart point per kernel, the roofs labelled."""

from __future__ import annotations

import dataclasses
import re

import pytest

from profilectl import countersets
from profilectl.formats.ncu import NcuCsvReader
from profilectl.model.document import Section
from profilectl.report.roofline_chart import roofline_svg
from profilectl.report.sections.roofline import compare_section, roofline_section
from profilectl.read.summary import RunMetadata, SourceInfo, Summary, build
from support import FIXTURES

H100 = FIXTURES / "nvidia-h100-roofline"


@pytest.fixture(scope="module")
def summary() -> Summary:
    tables = NcuCsvReader().read_file(H100 / "roofline_ncu_metrics.csv")
    built = build(tables, SourceInfo(kind="ncu-csv", path=str(H100)), countersets.load("roofline", "nvidia", "sm_90").derived)
    return dataclasses.replace(built, metadata=RunMetadata(gpu="NVIDIA H100 80GB HBM3 (sm_90)"))


@pytest.fixture(scope="module")
def section(summary) -> Section:
    built = roofline_section(summary)
    assert built is not None
    return built


def test_the_table_has_typed_columns_with_units_and_one_row_per_kernel(section, summary):
    table = section.tables[0]
    assert table.key == "roofline" and len(table.rows) == len(summary.kernels) == 5
    units = {c.name: c.unit for c in table.columns}
    assert units["flop_per_s"] == "flop_per_s" and units["hbm_bytes_per_s"] == "bytes_per_s"
    assert units["intensity_hbm"] == "flop_per_byte" and units["roof_percent"] == "percent"
    assert units["total_ns"] == "ns" and units["kernel"] is None
    assert all(len(row) == len(t.columns) for t in section.tables for row in t.rows)
    verdicts = [row[[c.name for c in table.columns].index("verdict")] for row in table.rows]
    assert verdicts == ["compute-bound", "memory-bound", "memory-bound", "memory-bound", "latency-bound"]


def test_findings_name_the_verdict_and_the_number_heaviest_first(section):
    first = section.findings[0]
    assert first.verdict == "compute-bound" and "94 % of" in first.sentence and first.next_step
    assert any("arithmetic intensity 809 FLOP/byte" in line for line in first.evidence)
    assert section.findings[-1].verdict == "latency-bound"
    assert any("achieved occupancy 6 %" in line for line in section.findings[-1].evidence)


def test_roofs_carry_measured_and_datasheet_values(section):
    roofs = section.tables[2]
    rows = {row[0]: row for row in roofs.rows}
    assert rows["BF16 matrix"][4] == 989.4e12 and rows["BF16 matrix"][6].startswith("measured")
    assert rows["HBM"][5] == 3.35e12
    assert any(note.startswith("peaks: measured") and "H100 SXM" in note for note in section.notes)


def test_the_chart_paints_one_point_per_kernel_and_labels_its_roofs(section):
    (chart,) = section.charts
    assert chart.kind == "loglog_scatter" and chart.x == "intensity_hbm" and chart.size == "total_ns"
    svg = roofline_svg(section)
    points = re.findall(r'<circle class="kernel-point[^"]*" data-kernel="([^"]+)"', svg)
    assert len(points) == 5 and len(set(points)) == 5
    assert len(re.findall(r'class="kernel-point no-flop"', svg)) == 2  # the two fill kernels: no FLOP
    assert re.search(r'>HBM 3\.3\d* TB/s<', svg) and "BF16 matrix" in svg and "FP32 vector" in svg


def test_compare_section_lists_each_kernel(summary):
    one = build(NcuCsvReader().read_file(H100 / "roofline_bounded_ncu_metrics.csv"), SourceInfo(kind="x", path="b"),
                countersets.load("roofline", "nvidia", "sm_90").derived)
    moved = compare_section(summary, one)
    assert moved is not None and len(moved.tables[0].rows) == 5
    assert len(moved.findings) == 4  # the four kernels the bounded run left out


def test_no_roofline_columns_no_section():
    assert roofline_section(Summary(source=SourceInfo(kind="x", path="x"))) is None


# ------------------------------------------------------------------ every format, through the CLI
def test_a_bare_ncu_capture_reports_its_roofline_in_every_format(tmp_path):
    """The user's own `ncu --csv` file of the roofline metrics: no counter set was named, the
    report finds the set by its counters and shows the section in md, html, json and csv alike."""
    import json
    from cli_support import cli_plain
    capture = H100 / "roofline_ncu_metrics.csv"
    md = cli_plain("report", str(capture), "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "## Roofline" in md.stdout and "compute-bound" in md.stdout and "memory-bound" in md.stdout
    html = cli_plain("report", str(capture), "--format", "html")
    assert html.stdout.count('class="roofline"') == 1 and "data-kernel=" in html.stdout
    assert cli_plain("report", str(capture), "--format", "csv", "-o", str(tmp_path / "r")).returncode == 0
    assert (tmp_path / "r.roofline.csv").read_text().count("\n") == 1 + 5  # header + one row per kernel
    moved = cli_plain("compare", str(capture), str(H100 / "roofline_bounded_ncu_metrics.csv"), "--format", "json")
    assert moved.returncode == 0, moved.stderr
    rows = json.loads(moved.stdout)["roofline"]["tables"][0]["rows"]
    assert rows and any("gemm" in str(r).lower() or "nvjet" in str(r) for r in rows)
