"""Hostile or broken Chrome traces cost little and end in one line (issue 25): nesting deeper than
Python's JSON decoder follows, a .json.gz that inflates by an absurd ratio, no event boundary for
hundreds of MB. Real files, read through the real reader and the real CLI."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilectl.errors import FormatError
from profilectl.formats import chrome_io, chrome_stream, torch_trace

REPO = Path(__file__).resolve().parents[2]
EVENT = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":1,"ts":1.0,"dur":2.0'


def test_args_nested_200000_deep_is_one_line_exit_2(tmp_path):
    depth = 200_000
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + EVENT + ',"args":' + "[" * depth + "]" * depth + "}]}")
    with pytest.raises(FormatError, match="nested deeper"):
        torch_trace.read(path)
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "nested deeper" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_a_gzip_that_inflates_absurdly_is_refused_with_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_io, "INFLATE_CHECK_FLOOR", 1 << 20)
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        fh.write(b" " * (16 << 20))  # 16 MiB of whitespace from ~16 KB
        fh.write(b"]}")
    assert path.stat().st_size < 100_000
    with pytest.raises(FormatError, match=r"refused: it inflates to more than 100x .*PROFILECTL_MAX_INFLATE_RATIO"):
        torch_trace.read(path)
    # the limit is configurable: lifted, the same file reads (an empty trace)
    monkeypatch.setenv("PROFILECTL_MAX_INFLATE_RATIO", "0")
    assert not torch_trace.read(path).kernels


def test_no_event_boundary_within_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILECTL_MAX_EVENT_BYTES", str(2 << 20))
    path = tmp_path / "wide.json"
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": float(i), "dur": 1.0}
              for i in range(200_000)]
    text = json.dumps({"traceEvents": events})
    head, rest = text.split("[", 1)
    path.write_text(head + "[" + " " * (24 << 20) + rest)  # a hole with no boundary, past the first chunk
    with pytest.raises(FormatError, match="no boundary between events within 2097152 bytes"):
        chrome_stream.read_trace(path, chunk=4 << 20, workers=1)
