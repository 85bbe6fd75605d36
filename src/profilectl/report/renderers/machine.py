"""The document for programs: every row of every table, raw numbers in columns named by their unit.

CSV: one file per table (`metadata` too: key,value rows). JSON: the whole document. Parquet: one
file per table (polars). SQLite: one database, a table per TableBlock, `metadata`, the sections'
notes and findings, and a view per section (its main table, or its notes).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from profilectl.model.document import Document, TableBlock
from profilectl.report.renderers.common import machine_columns

if TYPE_CHECKING:
    import sqlite3
    import polars as pl

CsvTable = tuple[Sequence[str], list[dict[str, Any]]]  # columns, rows


def machine_table(table: TableBlock) -> CsvTable:
    keep = machine_columns(table)
    names = [table.columns[i].name for i in keep]
    return names, [{name: row[i] for name, i in zip(names, keep)} for row in table.rows]


def csv_tables(document: Document) -> dict[str, CsvTable]:
    """Every table of the document, whole: name -> (columns, rows), then `metadata`."""
    tables = {table.key: machine_table(table) for section in document.sections for table in section.tables}
    if document.metadata:
        tables["metadata"] = (("key", "value"), [{"key": k, "value": v} for k, v in document.metadata])
    return tables


def csv_text(table: CsvTable) -> str:
    columns, rows = table
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main_csv_table(tables: dict[str, CsvTable]) -> str:
    """The table stdout gets: kernels (the one people put in spreadsheets), else the first table."""
    return "kernels" if "kernels" in tables or not tables else next(iter(tables))


KERNEL_COLUMNS = ("name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "percent")


def to_csv(tables: dict[str, CsvTable]) -> str:
    """The main table alone (main_csv_table), every row: one CSV document."""
    return csv_text(tables.get(main_csv_table(tables), (KERNEL_COLUMNS, [])))


def to_dict(document: Document) -> dict[str, Any]:
    return {"schema_version": document.schema_version, "title": document.title, "headline": document.headline,
            "metadata": dict(document.metadata),
            "sections": [{"key": s.key, "title": s.title, "notes": list(s.notes),
                          "findings": [{"verdict": f.verdict, "sentence": f.sentence, "evidence": list(f.evidence),
                                        "next_step": f.next_step, "scope": f.scope} for f in s.findings],
                          "charts": [{"kind": c.kind, "title": c.title, "table": c.table, "x": c.x, "y": c.y,
                                      "size": c.size, "label": c.label} for c in s.charts],
                          "tables": [{"key": t.key, "title": t.title,
                                      "columns": [{"name": c.name, "title": c.title, "unit": c.unit,
                                                   "aggregate": c.aggregate} for c in t.columns if c.show != "human"],
                                      "rows": machine_table(t)[1]} for t in s.tables]}
                         for s in document.sections]}


def json_text(document: Document) -> str:
    return json.dumps(to_dict(document), indent=1, default=str, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- polars, Parquet
def frame(columns: Sequence[str], rows: list[dict[str, Any]]) -> "pl.DataFrame":
    """A table as a polars DataFrame: one column per name, types inferred from every row."""
    import polars as pl
    return pl.DataFrame({name: [row.get(name) for row in rows] for name in columns}, strict=False)


def frames(document: Document) -> dict[str, "pl.DataFrame"]:
    return {name: frame(*table) for name, table in csv_tables(document).items()}


def parquet_bytes(table: "pl.DataFrame") -> bytes:
    """A table as the bytes of one Parquet file (polars writes into memory: the bytes then go to disk
    through files.write_into, whose errors are the operating system's own, a full disk included)."""
    buffer = io.BytesIO()
    table.write_parquet(buffer)
    return buffer.getvalue()


def write_parquet(document: Document, folder: Path) -> list[Path]:
    """One Parquet file per table in `folder` (the caller judged the names first)."""
    from profilectl.files import write_into
    written = []
    for name, table in frames(document).items():
        target = folder / f"{name}.parquet"
        data = parquet_bytes(table)
        write_into(target, lambda fh: fh.write(data))
        written.append(target)
    return written


# ---------------------------------------------------------------- SQLite
def _sql_type(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int, bool}:
        return "INTEGER"
    if kinds and kinds <= {int, float, bool}:
        return "REAL"
    return "TEXT"


def _name(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, str)) else str(value)


def fill_sqlite(document: Document, db: sqlite3.Connection) -> None:
    """Every table of the document into `db`, with the sections' notes and findings and a view per
    section: `section_<key>`, its first table (or its notes where it has none)."""
    for name, (columns, rows) in csv_tables(document).items():
        types = [_sql_type([row.get(c) for row in rows]) for c in columns]
        db.execute(f"CREATE TABLE {_name(name)} (" + ", ".join(f"{_name(c)} {t}" for c, t in zip(columns, types)) + ")")
        db.executemany(f"INSERT INTO {_name(name)} VALUES ({', '.join('?' for _ in columns)})",
                       [tuple(_plain(row.get(c)) for c in columns) for row in rows])
    db.execute("CREATE TABLE document_sections (position INTEGER, key TEXT, title TEXT, tables TEXT)")
    db.execute("CREATE TABLE document_notes (section TEXT, position INTEGER, note TEXT)")
    db.execute("CREATE TABLE document_findings (section TEXT, position INTEGER, verdict TEXT, sentence TEXT, "
               "evidence TEXT, next_step TEXT, scope TEXT)")
    for position, section in enumerate(document.sections):
        db.execute("INSERT INTO document_sections VALUES (?, ?, ?, ?)",
                   (position, section.key, section.title, ",".join(t.key for t in section.tables)))
        db.executemany("INSERT INTO document_notes VALUES (?, ?, ?)",
                       [(section.key, i, note) for i, note in enumerate(section.notes)])
        db.executemany("INSERT INTO document_findings VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(section.key, i, f.verdict, f.sentence, "\n".join(f.evidence), f.next_step, f.scope)
                        for i, f in enumerate(section.findings)])
        source = (f"SELECT * FROM {_name(section.tables[0].key)}" if section.tables else
                  f"SELECT position, note FROM document_notes WHERE section = '{section.key.replace(chr(39), '')}'")
        db.execute(f"CREATE VIEW {_name('section_' + section.key)} AS {source}")
    db.commit()


def sqlite_bytes(document: Document) -> bytes:
    """The document as the bytes of one SQLite database file: built in memory and serialized, so
    SQLite itself never opens a path (no journal beside the file, no link followed); files.write_into
    puts the bytes in place."""
    db = in_memory(document)
    try:
        if hasattr(db, "serialize"):  # Python 3.11+
            data: bytes = db.serialize()
            return data
        import tempfile  # Python 3.10: a copy in a private folder of this process's, read back
        with tempfile.TemporaryDirectory(prefix="profilectl-sqlite-") as private:
            import sqlite3
            copy = sqlite3.connect(Path(private) / "export.sqlite")
            try:
                db.backup(copy)
            finally:
                copy.close()
            return (Path(private) / "export.sqlite").read_bytes()
    finally:
        db.close()


def write_sqlite(document: Document, path: Path) -> None:
    from profilectl.files import write_into
    data = sqlite_bytes(document)
    write_into(path, lambda fh: fh.write(data))


def in_memory(document: Document) -> sqlite3.Connection:
    """The document as an in-memory SQLite database (`profilectl query`)."""
    import sqlite3  # SQLite output and query only: JSON and CSV renders (every report) do without it
    db = sqlite3.connect(":memory:")
    fill_sqlite(document, db)
    return db
