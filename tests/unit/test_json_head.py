"""Files recognised by what they are: the top-level keys of a JSON document walked in order, at a
bounded cost (formats/json_head.py), instead of looking for a key in the first 4 kB.

The real file: a benchmark harness's torch.profiler trace (AMD-AGI/TraceLens tests/traces/h100,
provenance in tests/fixtures/README.md) whose 26 kB pretty-printed "metadata" object comes before
"traceEvents" and Kineto's own keys (schemaVersion, deviceProperties, baseTimeNanoseconds) after
the events. Expected numbers come from the stdlib json and Decimal, not from profilectl."""

import gzip
import io
import json
from collections import defaultdict
from decimal import Decimal

import pytest

from profilectl.backends import READERS
from profilectl.errors import FormatError
from profilectl.formats import chrome_io, json_head, torch_trace
from profilectl.formats.reader import recognised

HARNESS = "harness/tracelens_h100_bert-small-uncased__1016001.json.gz"


def test_a_harness_trace_with_its_metadata_first_is_recognised_and_read(fixtures):
    path = fixtures / HARNESS
    text = gzip.decompress(path.read_bytes()).decode()
    doc = json.loads(text)
    assert list(doc)[:3] == ["metadata", "traceEvents", "schemaVersion"]
    assert text.index('"traceEvents"') > 26_000  # beyond any first-4-kB look
    head = json_head.head_of(path)
    assert head.keys == ("metadata", "traceEvents") and head.array_key == "traceEvents"
    assert text.encode()[head.offset:head.offset + 1] == b"["
    assert torch_trace.is_chrome_trace(path)
    (reader, files), = recognised(path, READERS)
    assert reader.kind == "chrome-trace"
    # kernel totals by the stdlib: µs with a fraction, to ns through Decimal
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for event in doc["traceEvents"]:
        if event.get("ph") == "X" and event.get("cat") == "kernel":
            expected[event["name"]][0] += 1
            expected[event["name"]][1] += int(Decimal(str(event["dur"])) * 1000)
    tables = reader.read(files)
    assert {n: [s.calls, int(s.total)] for n, s in tables.kernels.items()} == dict(expected)
    assert sum(c for c, _ in expected.values()) == 60


def test_the_events_are_found_by_the_key_not_by_the_text(tmp_path):
    """A value before the events that holds the text `"traceEvents": [` is not taken for them."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({
        "metadata": {"note": 'copied from {"traceEvents": [ ... ]}', "list": [{"traceEvents": [1]}]},
        "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7}],
        "schemaVersion": 1}))
    assert torch_trace.read(trace).kernels["k"].total == 2000


def test_the_scan_reads_no_more_than_its_limit():
    read_so_far = []
    body = b'{"metadata": "' + b"x" * (8 << 20) + b'", "traceEvents": []}'
    stream = io.BytesIO(body)

    def read(size):
        block = stream.read(size)
        read_so_far.append(len(block))
        return block
    head, _ = json_head.scan(read, limit=1 << 20)
    assert not head.found and head.kind == "object" and sum(read_so_far) <= 1 << 20
    assert json_head.scan(io.BytesIO(body).read, limit=16 << 20)[0].array_key == "traceEvents"


@pytest.mark.parametrize("text, kind, found", [
    ("", "", False), ("hello", "", False), ('"ID","Metric Name"', "", False),
    ('{"schemaVersion": 1, "events": []}', "object", False),
    ('[{"ph": "X"}]', "array", True), ('{"a": {"b": "}"}, "traceEvents" : [ ]}', "object", True),
    ('{"a": 1,', "object", False), ('{"a" 1}', "", False),
])
def test_heads_of_small_documents(text, kind, found):
    head, _ = json_head.scan(io.BytesIO(text.encode()).read)
    assert (head.kind, head.found) == (kind, found)


def test_reading_still_names_what_is_wrong(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"schemaVersion": 1, "events": []}')
    with pytest.raises(FormatError, match="no traceEvents list"):
        torch_trace.read(other)
    text = tmp_path / "notes.json"
    text.write_text("not json")
    with pytest.raises(FormatError, match="not a JSON object or array"):
        with chrome_io.open_stream(text) as fh:
            chrome_io.find_events(text, fh)
    assert not torch_trace.is_chrome_trace(other) and not torch_trace.is_chrome_trace(text)
