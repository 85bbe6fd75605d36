"""rocpd databases as rocprofv3 writes them (views over uuid tables: cut into ranges of `id`, the
rowid being NULL) read in parallel on several connections, several at once, and a database that is
locked or written while it is read: one line naming it."""

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from profilectl.errors import FormatError
from profilectl.formats import reader, rocpd
from rocpd_writer import SCHEMA_VERSIONS, RocpdWriter



def make_db(path, dispatches, schema="3.0.0", journal=None):
    """A rocpd database as rocprofv3 writes it (tests/rocpd_writer.py: AMD's schema SQL, views over
    uuid tables, an event per row), of `dispatches` kernels, each launched by its own API call
    (hipLaunchKernel and hipExtLaunchKernel in turn)."""
    writer = RocpdWriter(path, schema=schema, journal=journal)
    rows = []
    t = 1_000_000
    for i in range(dispatches):
        duration = 1_000 + (i * 7919) % 50_000
        name = "hipLaunchKernel" if i % 2 == 0 else "hipExtLaunchKernel"
        launch = writer.api(name, t, t + duration // 3, tid=7)
        rows.append((f"kernel_{(i * i) % 7}", t, t + duration, launch))
        t += duration + 100
    writer.dispatches(rows, tid=7)
    writer.close()
    return path


def figures(stats):
    return {name: (s.calls, s.total, s.minimum, s.maximum, round(s.std, 6)) for name, s in stats.items()}


@pytest.mark.parametrize("schema", SCHEMA_VERSIONS)
def test_ranges_in_parallel_give_the_numbers_of_one_query(tmp_path, monkeypatch, schema):
    path = make_db(tmp_path / "1_results.db", 5_000, schema)
    one = (figures(rocpd.rocpd_kernels(path)), figures(rocpd.rocpd_regions(path)))
    monkeypatch.setattr(rocpd, "PARALLEL_MIN_ROWS", 10)
    monkeypatch.setattr(rocpd.os, "cpu_count", lambda: 3)  # three ranges, uneven
    split = (figures(rocpd.rocpd_kernels(path)), figures(rocpd.rocpd_regions(path)))
    assert split == one
    assert sum(s[0] for s in one[0].values()) == 5_000 and one[1]["hipLaunchKernel"][0] == 2_500
    # and what SQLite computes in one statement, through AMD's own view of the dispatches
    db = sqlite3.connect(path)
    expected = {name: (n, float(total)) for name, n, total in db.execute(
        'SELECT S.display_name, count(*), sum(K."end" - K.start) FROM rocpd_kernel_dispatch K '
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
    table = sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name LIKE 'rocpd_kernel_dispatch_%'").fetchone()[0]
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, time
        db = sqlite3.connect({str(path)!r})
        end = time.monotonic() + 60
        i = 10_000_000
        while time.monotonic() < end:
            i += 1
            db.execute("INSERT INTO `{table}` (id, nid, pid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, "
                       "start, end, workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, "
                       "grid_size_z) VALUES (?, 1, 1, 1, 1, ?, 0, 0, 5, 9, 1, 1, 1, 1, 1, 1)", (i, i))
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


def issue_example(path, schema, external):
    """The story of issue 33, as rocprofv3 writes it: a 9 µs hipMalloc first, a ROCTx range "step"
    around one 100 ns hipLaunchKernel whose kernel runs 1000 ns, two more launches (100 ns each)
    after it whose kernels run 1500 ns each, and a hipMemcpyAsync with its 400 ns copy. `external`:
    every record's external correlation id (0 as rocprofv3 leaves it; one shared value as a tool
    or --kernel-rename sets it): a reader that links by it links everything to everything."""
    writer = RocpdWriter(path, schema=schema, pid=11)
    writer.api("hipMalloc", 100, 9_100, tid=11, external=external)
    writer.marker("step", 10_000, 13_000, tid=11)
    inside = writer.api("hipLaunchKernel", 10_100, 10_200, tid=11, external=external)
    later = [writer.api("hipLaunchKernel", t, t + 100, tid=11, external=external) for t in (14_000, 14_200)]
    copy = writer.api("hipMemcpyAsync", 17_000, 17_100, tid=11, external=external)
    event = writer.dispatch("gemm", 10_500, 11_500, inside, tid=11, external=external)
    writer.counter(event, "SQ_WAVES", 256)
    for launch, start in zip(later, (14_500, 16_000)):
        writer.dispatch("relu", start, start + 1_500, launch, tid=11, external=external)
    writer.copy("MEMORY_COPY_DEVICE_TO_HOST", 17_200, 17_600, copy, tid=11, external=external)
    return writer.close()


@pytest.mark.parametrize("external", [0, 7], ids=["no-external-id", "shared-external-id"])
@pytest.mark.parametrize("schema", SCHEMA_VERSIONS)
def test_every_table_is_filled_and_every_link_is_exact(tmp_path, schema, external):
    from profilectl.analysis.timeline import analyse
    tables = rocpd.RocpdReader().read_file(issue_example(tmp_path / "11_results.db", schema, external))
    assert {k: (s.calls, s.total) for k, s in tables.kernels.items()} == {"gemm": (1, 1000), "relu": (2, 3000)}
    assert {k: (s.calls, s.total) for k, s in tables.api.items()} == \
        {"hipMalloc": (1, 9000), "hipLaunchKernel": (3, 300), "hipMemcpyAsync": (1, 100)}  # no ROCTx range here
    assert {k: (s.calls, s.total) for k, s in tables.memory_copies.items()} == {"MEMORY_COPY_DEVICE_TO_HOST": (1, 400)}
    assert [(c.kernel, c.counter, c.total) for c in tables.counters] == [("gemm", "SQ_WAVES", 256.0)]
    [step] = tables.annotations
    assert (step.name, step.calls, step.total_ns, step.gpu_ns) == ("step", 1, 3000, 1000)  # not 4400: every kernel
    launch = analyse(tables.timelines).merged.launch
    assert launch.launch_call_ns == 300  # three 100 ns launch calls, not 27 µs of hipMalloc
    assert launch.launch_delay_mean_ns == pytest.approx((300 + 400 + 1700) / 3)  # call end to kernel start
