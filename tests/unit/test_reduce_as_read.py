"""A folder of several ranks' traces read with each rank's timeline reduced as soon as it is read
(formats/reader.py read_groups(reduce_ranks=True), what `report FOLDER` does): no rank's events are
held once the next rank is read, and the report is the raw read's, figure for figure. Not where
another reader's timelines could be of the same ranks (a torch trace beside), nor for one rank.

Inputs: the real rocprofv3 traces of tests/fixtures/rocprofv3-docs laid out one output per process
and rocpd databases per process (test_bare_partials' trees); the real torch.profiler traces of two
DDP ranks (tests/fixtures/diagnosis/ddp) beside rocprofv3 traces named for the same ranks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profilectl.backends import READERS
from profilectl.formats.reader import read_groups, recognised
from profilectl.formats.rocpd import RocpdReader
from profilectl.formats.rocprofv3 import Rocprofv3CsvReader
from profilectl.read.load import load
from profilectl.read.summary import SourceInfo, build
from support import REPO
from test_bare_partials import rocpd_tree, rocprofv3_tree


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))


def raw_document(folder: Path) -> dict:
    """What `report FOLDER` gave before: every group read raw, the timelines analysed at the end."""
    tables = read_groups(recognised(folder, READERS))
    assert tables.reductions is None and tables.timelines
    source = SourceInfo(kind="+".join(s.kind for s in tables.sources), path=str(folder),
                        files=tuple(f for s in tables.sources for f in s.files))
    from profilectl.countersets import derived_for_files
    derived = derived_for_files({c.counter for c in tables.counters})
    return plain(build(tables, source, derived or None,
                       perfetto_trace=tables.trace_files[0] if tables.trace_files else None))


def plain(summary) -> dict:
    data = summary.to_dict()
    for key in ("cache_hit", "metadata"):
        data.pop(key)
    return data


@pytest.mark.parametrize("make, reader", [(rocprofv3_tree, Rocprofv3CsvReader), (rocpd_tree, RocpdReader)],
                         ids=["rocprofv3-csv", "rocpd"])
def test_each_rank_is_reduced_as_it_is_read_with_the_raw_reads_numbers(tmp_path, make, reader):
    folder = make(tmp_path / "out")
    groups = recognised(folder, READERS)
    assert [type(r) for r, _ in groups] == [reader]
    tables = read_groups(groups, reduce_ranks=True)
    assert tables.timelines == ()  # no rank's events kept
    assert tables.reductions is not None and len(tables.reductions) == len(tables.ranks) >= 3
    document = plain(load(folder))
    assert document == raw_document(folder)
    assert document["timeline"] and len(document["ranks"]) >= 3 and document["diagnosis"]


def test_the_csv_reader_lets_each_ranks_columns_go_before_the_next(tmp_path, monkeypatch):
    """While rank N+1 is read, no earlier rank's timeline is alive."""
    import gc
    import weakref

    from profilectl.formats import rocprofv3
    folder = rocprofv3_tree(tmp_path / "out")
    made: list[weakref.ref] = []
    alive_at_read: list[int] = []
    read = rocprofv3.rank_timeline_of

    def watched(*args, **kwargs):
        gc.collect()
        alive_at_read.append(sum(ref() is not None for ref in made))
        timeline, columns = read(*args, **kwargs)
        made.append(weakref.ref(timeline))
        return timeline, columns
    monkeypatch.setattr(rocprofv3, "rank_timeline_of", watched)
    files = sorted(p for p in folder.rglob("*.csv"))
    Rocprofv3CsvReader().read_reducing(files)
    assert alive_at_read == [0, 0, 0, 0]
    alive_at_read.clear()
    made.clear()
    kept = Rocprofv3CsvReader().read(files)  # the raw read keeps them all, as before
    assert alive_at_read == [0, 1, 2, 3] and len(kept.timelines) == 4


def test_not_reduced_where_a_torch_trace_beside_has_timelines_of_the_same_ranks(tmp_path):
    folder = tmp_path / "out"
    rocprofv3_tree(folder, processes=(("vm", "rank0-843", 1.0), ("vm", "rank1-844", 1.5)))
    for f in (REPO / "tests/fixtures/diagnosis/ddp").iterdir():
        shutil.copy2(f, folder / f.name)
    groups = recognised(folder, READERS)
    assert {r.kind for r, _ in groups} >= {"rocprofv3-csv", "chrome-trace"}
    tables = read_groups(groups, reduce_ranks=True)
    assert tables.reductions is None
    assert {(t.rank, t.host) for t in tables.timelines} == {("0", "vm"), ("1", "vm")}
    assert len(tables.timelines) == 4  # each rank's CSV and torch timelines, combined in the analysis
    assert plain(load(folder)) == raw_document(folder)


def test_one_rank_is_read_raw(tmp_path):
    folder = rocprofv3_tree(tmp_path / "out", processes=(("node1", 111, 1.0),))
    tables = read_groups(recognised(folder, READERS), reduce_ranks=True)
    assert tables.reductions is None and len(tables.timelines) == 1
    assert plain(load(folder)) == raw_document(folder)
