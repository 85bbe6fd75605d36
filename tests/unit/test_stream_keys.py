"""Stream keys of the polars CSV pass read as their hash, their texts from each key's first row in a
second, short pass (formats/polars_csv._HashedKeys): every row keeps the key the file gives it, ids in
order of first appearance as the csv module numbers them, also where keys share a slot of the table,
a key first appears in the last batch, or a cell is empty; a file rewritten between the two passes is
a one-line error, never a wrong stream name."""

import csv
from pathlib import Path

import numpy as np
import pytest

from profilectl.errors import FormatError
from profilectl.formats import polars_csv

HEADER = ["Kind", "Agent_Id", "Queue_Id", "Kernel_Name", "Start_Timestamp", "End_Timestamp"]


def _write(path: Path, agents: list[str], queues: list[str]) -> None:
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(HEADER)
        for i, (agent, queue) in enumerate(zip(agents, queues)):
            out.writerow(["KERNEL_DISPATCH", agent, queue, f"k{i % 5}", 1_000 + 10 * i, 1_005 + 10 * i])


def _read(path: Path) -> polars_csv.TraceColumns:
    return polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp", ("Agent_Id", "Queue_Id"))


@pytest.mark.parametrize("slot_bits", [polars_csv._HashedKeys.SLOT_BITS, 1])  # 1: every key fights for 2 slots
def test_each_row_keeps_its_key_in_order_of_first_appearance(tmp_path, monkeypatch, slot_bits):
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)
    monkeypatch.setattr(polars_csv._HashedKeys, "SLOT_BITS", slot_bits)
    rng = np.random.default_rng(5)
    count = 9_500
    agents = [f"Agent {a}" for a in rng.integers(2, 5, count)]
    queues = [str(q) for q in rng.integers(1, 4, count)]
    agents[17] = ""  # an empty cell reads as "" (the csv module's reading)
    agents[-1], queues[-1] = "Agent 9", "7"  # a key first seen in the last batch, on the last row
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, agents, queues)
    cols = _read(path)
    keys = [f"{a}:{q}" for a, q in zip(agents, queues)]
    assert cols.stream is not None and [cols.streams[i] for i in cols.stream.tolist()] == keys
    assert cols.streams == list(dict.fromkeys(keys))  # ids in order of first appearance


def test_one_key_throughout_is_one_shared_value(tmp_path, monkeypatch):
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, ["Agent 4"] * 5_000, ["1"] * 5_000)
    cols = _read(path)
    assert cols.streams == ["Agent 4:1"] and cols.stream is not None and cols.stream.strides == (0,)


def test_keys_that_swap_or_move_values_between_columns_stay_apart(tmp_path, monkeypatch):
    """A key's hash combines one hash per column: keys made of the same values in other columns, or
    with an empty cell on the other side, are other streams."""
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)
    pairs = [("7", "9"), ("9", "7"), ("7", ""), ("", "7"), ("7", "7"), ("", ""), ("9", "9")]
    agents, queues = zip(*(pairs * 400))
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, list(agents), list(queues))
    cols = _read(path)
    assert cols.streams == [f"{a}:{q}" for a, q in pairs]
    assert cols.stream is not None and cols.stream.tolist() == list(range(len(pairs))) * 400


@pytest.mark.parametrize("categories", [True, False])
def test_the_polars_and_the_csv_readings_key_streams_alike(tmp_path, monkeypatch, categories):
    """A stream is its columns' values in both readings (a large file's polars pass, a small one's
    csv module): values holding the ":" that joins a key's text stay apart alike."""
    from profilectl.formats import rocprofv3
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)
    pairs = [("a:b", "c"), ("a", "b:c"), (":", ""), ("", ":"), ("Agent 4", "1")]
    agents, queues = zip(*(pairs * 300))
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, list(agents), list(queues))
    readings = []
    for fast in (True, False):
        monkeypatch.setattr(polars_csv, "fast_enough", lambda path, fast=fast: fast)
        monkeypatch.setattr(polars_csv, "per_query_categories", lambda pl: categories)
        cols = rocprofv3._intervals(path, "Kernel_Name", ("Agent_Id", "Queue_Id"), False)
        readings.append((cols.streams, np.asarray(cols.stream).tolist()))
    assert readings[0] == readings[1]
    assert readings[0][0] == ["a:b:c", "a:b:c", "::", "::", "Agent 4:1"]
    assert readings[0][1] == list(range(len(pairs))) * 300


def test_a_file_rewritten_between_the_passes_is_a_one_line_error(tmp_path, monkeypatch):
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, ["Agent 4"] * 3_000 + ["Agent 5"] * 10, ["1"] * 3_010)
    texts = polars_csv._HashedKeys.texts

    def rewritten(self, *args):  # another writer replaces the file once the first pass has ended
        _write(path, ["Agent 6"] * 3_010, ["2"] * 3_010)
        return texts(self, *args)
    monkeypatch.setattr(polars_csv._HashedKeys, "texts", rewritten)
    with pytest.raises(FormatError) as caught:
        _read(path)
    assert "changed while it was read" in str(caught.value) and "\n" not in str(caught.value)


def test_polars_without_per_query_categories_gives_the_same_columns(tmp_path, monkeypatch):
    """The reading for polars < 1.32 (names and keys hashed, texts from each batch as a value first
    appears: _Dictionary) gives the columns the categorical reading gives, ids in the same order."""
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)
    monkeypatch.setattr(polars_csv._Dictionary, "SLOT_BITS", 2)  # values share slots: the slow path too
    rng = np.random.default_rng(9)
    count = 6_500
    agents = [f"Agent {a}" for a in rng.integers(2, 6, count)]
    queues = [str(q) for q in rng.integers(1, 3, count)]
    agents[-1], queues[-1] = "Agent 99", "7"
    path = tmp_path / "11_kernel_trace.csv"
    _write(path, agents, queues)
    with open(path, "a", newline="") as handle:  # names first seen late, and an empty name
        csv.writer(handle).writerows([["KERNEL_DISPATCH", "Agent 2", "1", name, 10**9 + i, 10**9 + i + 3]
                                      for i, name in enumerate(["late kernel", "", "k1", "another late one"])])
    categorical = _read(path)
    monkeypatch.setattr(polars_csv, "per_query_categories", lambda pl: False)
    hashed = _read(path)
    assert hashed.names == categorical.names and "late kernel" in hashed.names and "" in hashed.names
    assert hashed.streams == categorical.streams and "Agent 99:7" in hashed.streams
    assert np.array_equal(hashed.name, categorical.name) and np.array_equal(hashed.stream, categorical.stream)
    assert np.array_equal(hashed.start, categorical.start) and np.array_equal(hashed.end, categorical.end)
    assert hashed.stats() == categorical.stats()
