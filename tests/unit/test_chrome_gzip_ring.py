""".json.gz chunks through the shared ring (formats/chrome_parallel.py: Ring; chrome_io.py: _ring_tasks): the same
chunks, bytes and numbers as the chunks in their own buffers; events longer than a slot, false
boundaries inside strings, broken gzip and a worker that dies end as before, in one line."""

import gzip
import json
import os
import random

import pytest

from profilectl.errors import FormatError, ProfilectlError
from profilectl.formats import chrome_io, chrome_parallel, chrome_stream


def _trace(tmp_path, count=3000, seed=5):
    rng = random.Random(seed)
    events = []
    for i in range(count):
        name = f"k{rng.randrange(40)}"
        if i % 11 == 0:
            name = 'odd }, {"ph": "X"} name ' + str(i % 3)  # a false boundary inside a string
        if i % 997 == 0:
            name = "long " + "x" * rng.randrange(20_000, 60_000)  # longer than a small slot
        events.append({"ph": "X", "cat": rng.choice(["kernel", "cpu_op", "gpu_memcpy", "cuda_runtime"]),
                       "name": name, "pid": rng.randrange(2), "tid": rng.randrange(3),
                       "ts": round(1000 + i * 3.5, 3), "dur": round(rng.uniform(0.5, 3.0), 3),
                       "args": {"correlation": i}})
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x"}, indent=rng.choice([None, 1]))
    plain = tmp_path / "t.json"
    plain.write_text(text)
    zipped = tmp_path / "t.json.gz"
    zipped.write_bytes(gzip.compress(text.encode()))
    return plain, zipped


def _chunks(path, ring=None, chunk=8_000):
    """(start, end, last) and `[` + bytes + `]` of each chunk _tasks cuts, copied as it comes (a slot
    is written again three chunks later)."""
    with chrome_io.open_stream(path) as fh:
        layout, first = chrome_io.find_events(path, fh)
        for task in chrome_io.chunk_tasks(path, fh, layout, first, path.stat().st_size, chunk, True,
                                         seekable=False, ring=ring):
            if task.slot >= 0:
                data = ring.memory[task.slot:task.slot + task.end - task.start + 2]
            else:
                data = bytes(task.data)
            yield (task.start, task.end, task.last, task.slot >= 0), data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ring_chunks_are_the_buffered_chunks(tmp_path, seed):
    _, zipped = _trace(tmp_path, seed=seed)
    ring = chrome_parallel.Ring(3, 8_000 + 8_000 + 2)
    try:
        placed = list(_chunks(zipped, ring))
    finally:
        ring.memory.close()
    buffered = list(_chunks(zipped))
    assert [(a, b, c) for (a, b, c, _), _ in placed] == [(a, b, c) for (a, b, c, _), _ in buffered]
    assert [data for _, data in placed] == [data for _, data in buffered]
    assert any(in_slot for (*_, in_slot), _ in placed) and not all(in_slot for (*_, in_slot), _ in placed)
    assert [last for (_, _, last, _), _ in placed].count(True) == 1


@pytest.mark.parametrize("chunk", [3_000, 20_000, None])
def test_gzip_through_the_ring_reads_what_the_plain_file_gives(tmp_path, chunk):
    plain, zipped = _trace(tmp_path)
    expected = chrome_stream.read_trace(plain, workers=1, chunk=chunk)
    assert expected.events == 3000
    assert chrome_stream.read_trace(zipped, workers=2, chunk=chunk) == expected
    assert chrome_stream.read_trace(zipped, workers=2, chunk=chunk, fast=False) == expected
    assert not chrome_parallel._RING  # nothing kept after the read


def test_truncated_gzip_through_the_ring_is_one_line(tmp_path):
    _, zipped = _trace(tmp_path)
    data = zipped.read_bytes()
    zipped.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(FormatError, match="truncated or corrupt gzip") as excinfo:
        chrome_stream.read_trace(zipped, workers=2, chunk=5_000)
    assert "\n" not in str(excinfo.value)


def _die(task):
    os._exit(9)


def test_a_worker_that_dies_is_one_line(tmp_path, monkeypatch):
    _, zipped = _trace(tmp_path)
    monkeypatch.setattr(chrome_stream, "read_chunk", _die)
    with pytest.raises(ProfilectlError, match="a process reading it ended abruptly") as excinfo:
        chrome_stream.read_trace(zipped, workers=2, chunk=5_000)
    assert "\n" not in str(excinfo.value)
    assert not chrome_parallel._RING


def test_a_gzip_bomb_through_the_ring_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_io, "INFLATE_CHECK_FLOOR", 1 << 20)
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        fh.write((b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":1,"ts":1.0,"dur":2.0},' + b" " * 2000) * 8000)
        fh.write(b'{"ph":"X"}]}')
    with pytest.raises(FormatError, match="refused: it inflates to more than 100x"):
        chrome_stream.read_trace(path, workers=2, chunk=1 << 20)
    assert not chrome_parallel._RING
