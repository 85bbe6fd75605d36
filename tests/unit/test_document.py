"""Renderers are generic over the document: a section none of them has heard of (one builder
function) reaches every format, its finding, its table and its chart included."""

from __future__ import annotations

import json
import sqlite3

from rich.console import Console

from profilectl.model.document import Chart, Column, Finding, Section, TableBlock
from profilectl.report.renderers import charts, html, machine, markdown, render, terminal
from profilectl.report.sections import BUILDERS, ORDER, build_document
from profilectl.read.summary import KernelRow, SourceInfo, Summary


def bottleneck(summary: Summary) -> Section | None:
    """A made-up analysis: one finding, one table, one chart of a kind no renderer draws yet."""
    rows = tuple((k.name, k.total_ns, 0.25) for k in summary.kernels)
    return Section(key="bottleneck", title="Bottlenecks",
                   findings=(Finding(verdict="memory-bound", sentence="gemm waits on memory",
                                     evidence=("12.5 % of peak FLOP/s, 91 % of peak bandwidth",),
                                     next_step="fuse the epilogue", scope="kernel gemm"),),
                   tables=(TableBlock(key="bottleneck", title="Bottlenecks", rows=rows,
                                      columns=(Column("kernel", "kernel"), Column("total_ns", "time", "ns", "sum"),
                                               Column("share_of_peak", "of peak", "ratio"))),),
                   charts=(Chart(kind="loglog_scatter", title="Roofline", table="bottleneck", x="share_of_peak",
                                 y="total_ns"),))


SUMMARY = Summary(source=SourceInfo("chrome-trace", "x.json"),
                  kernels=(KernelRow("gemm", 4, 2_000_000.0, 500_000.0, 100.0),))


def test_one_builder_reaches_every_format(tmp_path):
    document = build_document(SUMMARY, [*BUILDERS, bottleneck])
    assert [s.key for s in document.sections] == ["kernels", "bottleneck"]
    console = Console(record=True, width=200)
    terminal.render(console, document)
    texts = {"terminal": console.export_text(), "md": markdown.render(document), "html": html.render(document)}
    for fmt, text in texts.items():
        for expected in ("Bottlenecks", "memory-bound", "gemm waits on memory", "91 % of peak bandwidth",
                         "fuse the epilogue", "2.000 ms"):
            assert expected in text, (fmt, expected)
    tables = machine.csv_tables(document)
    assert tables["bottleneck"][1] == [{"kernel": "gemm", "total_ns": 2_000_000.0, "share_of_peak": 0.25}]
    as_json = json.loads(render(document, "json"))
    assert as_json["sections"][1]["findings"][0]["verdict"] == "memory-bound"
    database = tmp_path / "r.sqlite"
    machine.write_sqlite(document, database)
    db = sqlite3.connect(database)
    assert db.execute("SELECT kernel, total_ns FROM section_bottleneck").fetchall() == [("gemm", 2_000_000.0)]
    assert db.execute("SELECT verdict FROM document_findings").fetchall() == [("memory-bound",)]


def test_a_chart_kind_is_one_function(monkeypatch):
    document = build_document(SUMMARY, [bottleneck])
    monkeypatch.delitem(charts.CHARTS, "loglog_scatter")  # the roofline registers this kind: take it away first
    assert "<svg" not in html.render(document)  # no renderer for the kind yet: left out, not an error
    drawn = []

    def scatter(chart: Chart, table: TableBlock, top: int) -> str:
        drawn.append(chart.title)
        return '<svg aria-label="roofline"></svg>'
    monkeypatch.setitem(charts.CHARTS, "loglog_scatter", scatter)
    assert '<svg aria-label="roofline"></svg>' in html.render(document) and drawn == ["Roofline"]


def test_every_section_module_is_in_the_order():
    from pathlib import Path
    import profilectl.report.sections as sections
    modules = {p.stem for p in Path(sections.__file__).parent.glob("*.py")} - {"__init__", "common"}
    assert modules == set(ORDER) and len(BUILDERS) == len(ORDER)
