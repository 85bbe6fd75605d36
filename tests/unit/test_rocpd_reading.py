"""rocpd databases read in parallel (rowid ranges on several connections), several at once, and a
database that is locked or written while it is read: one line naming it."""

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from profilectl.errors import FormatError
from profilectl.formats import reader, rocpd

GUID = "00000000-0000-0000-0000-000000000001"


def make_db(path, dispatches, timestamps_table=False, journal="DELETE"):
    """A rocpd database in either schema generation: start/end on the row, or start_id/end_id."""
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA journal_mode = {journal}")
    interval = "start_id INTEGER, end_id INTEGER" if timestamps_table else 'start BIGINT, "end" BIGINT'
    db.executescript(f"""
        CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, guid TEXT, string TEXT);
        CREATE TABLE rocpd_info_kernel_symbol (id INTEGER PRIMARY KEY, guid TEXT, display_name TEXT);
        CREATE TABLE rocpd_timestamp (id INTEGER PRIMARY KEY, guid TEXT, value BIGINT);
        CREATE TABLE rocpd_kernel_dispatch (id INTEGER PRIMARY KEY, guid TEXT, kernel_id INTEGER, {interval},
                                            event_id INTEGER);
        CREATE TABLE rocpd_region (id INTEGER PRIMARY KEY, guid TEXT, name_id INTEGER, {interval});
    """)
    db.executemany("INSERT INTO rocpd_info_kernel_symbol VALUES (?, ?, ?)",
                   [(k, GUID, f"kernel_{k}") for k in range(7)])
    db.executemany("INSERT INTO rocpd_string VALUES (?, ?, ?)", [(1, GUID, "hipLaunchKernel"), (2, GUID, "hipMemcpy")])
    rows, regions, stamps = [], [], []
    t = 1_000_000
    for i in range(dispatches):
        duration = 1_000 + (i * 7919) % 50_000
        if timestamps_table:
            stamps += [(2 * i + 1, GUID, t), (2 * i + 2, GUID, t + duration)]
            rows.append((i + 1, GUID, (i * i) % 7, 2 * i + 1, 2 * i + 2, i))
            regions.append((i + 1, GUID, 1 + i % 2, 2 * i + 1, 2 * i + 2))
        else:
            rows.append((i + 1, GUID, (i * i) % 7, t, t + duration, i))
            regions.append((i + 1, GUID, 1 + i % 2, t, t + duration // 3))
        t += duration + 100
    db.executemany("INSERT INTO rocpd_timestamp VALUES (?, ?, ?)", stamps)
    db.executemany("INSERT INTO rocpd_kernel_dispatch VALUES (?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO rocpd_region VALUES (?, ?, ?, ?, ?)", regions)
    db.commit()
    db.close()
    return path


def figures(stats):
    return {name: (s.calls, s.total, s.minimum, s.maximum, round(s.std, 6)) for name, s in stats.items()}


@pytest.mark.parametrize("timestamps_table", [False, True])
def test_ranges_in_parallel_give_the_numbers_of_one_query(tmp_path, monkeypatch, timestamps_table):
    path = make_db(tmp_path / "1_results.db", 5_000, timestamps_table)
    one = (figures(rocpd.rocpd_kernels(path)), figures(rocpd.rocpd_regions(path)))
    monkeypatch.setattr(rocpd, "PARALLEL_MIN_ROWS", 10)
    monkeypatch.setattr(rocpd.os, "cpu_count", lambda: 3)  # three ranges, uneven
    split = (figures(rocpd.rocpd_kernels(path)), figures(rocpd.rocpd_regions(path)))
    assert split == one
    assert sum(s[0] for s in one[0].values()) == 5_000 and one[1]["hipLaunchKernel"][0] == 2_500
    # and what SQLite computes in one statement, through the join
    db = sqlite3.connect(path)
    duration = ("(TE.value - TS.value)" if timestamps_table else '(K."end" - K.start)')
    joins = (" JOIN rocpd_timestamp TS ON TS.id = K.start_id JOIN rocpd_timestamp TE ON TE.id = K.end_id"
             if timestamps_table else "")
    expected = {name: (n, float(total)) for name, n, total in db.execute(
        f"SELECT S.display_name, count(*), sum({duration}) FROM rocpd_kernel_dispatch K{joins} "
        "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id GROUP BY 1")}
    assert {name: f[:2] for name, f in split[0].items()} == expected


def test_several_databases_read_side_by_side_merge_in_order(tmp_path, monkeypatch):
    paths = [make_db(tmp_path / f"{pid}_results.db", 2_000 + pid) for pid in (1, 2, 3)]
    alone = rocpd.RocpdReader().read(paths)
    monkeypatch.setattr(reader, "CONCURRENT_MIN_BYTES", 1)
    together = rocpd.RocpdReader().read(paths)
    assert figures(together.kernels) == figures(alone.kernels)
    assert together.ranks == alone.ranks and len(together.ranks) == 3  # in file order


def test_a_locked_database_is_one_line(tmp_path, monkeypatch):
    path = make_db(tmp_path / "1_results.db", 100)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        db = sqlite3.connect({str(path)!r}, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(rocpd, "BUSY_TIMEOUT_S", 0.2)
        with pytest.raises(FormatError) as excinfo:
            rocpd.RocpdReader().read_file(path)
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    message = str(excinfo.value)
    assert "\n" not in message and str(path) in message and "locked by another process" in message


def test_a_database_written_while_it_is_read_is_one_line(tmp_path):
    """A writer commits all the time (WAL: readers are never blocked, each connection sees its own
    snapshot): the read notices the database changed under it and says so."""
    path = make_db(tmp_path / "1_results.db", 60_000, journal="WAL")
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, time
        db = sqlite3.connect({str(path)!r})
        end = time.monotonic() + 60
        i = 10_000_000
        while time.monotonic() < end:
            i += 1
            db.execute("INSERT INTO rocpd_kernel_dispatch VALUES (?, ?, 1, 5, 9, 0)", (i, {GUID!r}))
            db.commit()
            if i == 10_000_001:
                print("writing", flush=True)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        with pytest.raises(FormatError) as excinfo:
            rocpd.rocpd_kernels(path)
    finally:
        writer.kill()
        writer.wait(timeout=10)
    message = str(excinfo.value)
    assert "\n" not in message and str(path) in message and "changed while it was read" in message
