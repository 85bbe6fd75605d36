"""`profilectl query RUN "SELECT ..."`: SQL over a report's tables.

SQLite (the standard library's sqlite3), not polars' SQL context: always there (polars is an
optional extra), the same database `report --format sqlite` writes (a query that works here works
on that file, in DuckDB's sqlite scanner, in any SQLite client), and the dialect rocpd's own
databases speak. The tables are the report's, every row (kernels, api, memory_copies, operators,
counters, ranks, timeline, steps, idle_gaps, power, power_samples, ...; `SELECT name FROM
sqlite_master` lists them), with a view per section (section_<key>).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from profilectl.errors import UsageError
from profilectl.report.document import Document


def run_query(document: Document, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of one SQL statement over the document's tables; a bad query is a
    UsageError naming SQLite's complaint and the tables there are."""
    from profilectl.report.renderers.machine import in_memory
    db = in_memory(document)
    try:
        cursor = db.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        return columns, cursor.fetchall()
    except sqlite3.Error as exc:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                                          "ORDER BY type, name")]
        raise UsageError(f"query: {exc} (tables and views: {', '.join(names)})") from None
    finally:
        db.close()
