"""torch.profiler Chrome traces: streamed reading (.json, .json.gz, chunks, workers), operators as
torch's key_averages() counts them, the runtime API table, and broken files."""

import gzip
import json
import random
from decimal import Decimal

import pytest

from profilectl.errors import FormatError
from profilectl.formats import chrome_events, chrome_stream, chrome_tree, torch_trace
from profilectl.formats.reader import read_path
from profilectl.read.summary import kernel_rows

H200 = "nvidia-h200/torch_profiler_trace.json"


def event(name, ts_ns, dur_ns, cat="cpu_op", tid=1, pid=1, **extra):
    """A Chrome-trace event as kineto writes it: microseconds with 3 decimals."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": round(ts_ns / 1000, 3), "dur": round(dur_ns / 1000, 3), "args": {"External id": 1}, **extra}


def write(path, events, **top):
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, **top}, indent=1))
    return path


def ops(tables):
    return {name: (s.calls, s.total, s.self_total) for name, s in tables.operators.items()}


# ---------------------------------------------------------------------------------------------
# torch's semantics, written again here from its documented behaviour (torch/autograd/
# profiler_util.py: EventList._populate_cpu_children, _remove_dup_nodes, key_averages,
# FunctionEvent.self_cpu_time_total), straight and slow, to check the streamed version against.

class Node:
    def __init__(self, name, start, end, operator):
        self.name, self.start, self.end, self.operator = name, start, end, operator
        self.children, self.parent = [], None


def ns(us):
    """Exact integer ns of a JSON number of microseconds (torch keeps integer ns)."""
    return int(Decimal(repr(us)) * 1000)


def torch_key_averages(events):
    nodes = [Node(e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["cat"] == "cpu_op")
             for e in events if e.get("ph") == "X" and e["cat"] in chrome_events.TREE_CATEGORIES
             and e["name"] not in chrome_events.UNLISTED_BY_TORCH]
    threads = {}
    for e, node in zip([e for e in events if e.get("ph") == "X" and e["cat"] in chrome_events.TREE_CATEGORIES
                        and e["name"] not in chrome_events.UNLISTED_BY_TORCH], nodes):
        threads.setdefault((e["pid"], e["tid"]), []).append(node)
    for thread in threads.values():
        stack = []
        for node in sorted(thread, key=lambda n: (n.start, -n.end)):
            while stack and (node.start >= stack[-1].end or node.end > stack[-1].end):
                stack.pop()
            if stack:
                stack[-1].children.append(node)
                node.parent = stack[-1]
            stack.append(node)
    alive = list(nodes)
    while True:  # _remove_dup_nodes: until nothing changes
        doomed = set()
        for node in alive:
            parent = node.parent
            if parent is not None and parent.name == node.name and len(parent.children) == 1:
                parent.children = node.children
                for child in node.children:
                    child.parent = parent
                doomed.add(id(node))
        if not doomed:
            break
        alive = [n for n in alive if id(n) not in doomed]
    out = {}
    for node in alive:
        if node.operator:
            calls, total, self_ns = out.get(node.name, (0, 0, 0))
            dur = node.end - node.start
            out[node.name] = (calls + 1, total + dur, self_ns + dur - sum(c.end - c.start for c in node.children))
    return {name: (calls, float(total), float(self_ns)) for name, (calls, total, self_ns) in out.items()}


def test_nested_same_name_operator_counts_once_as_torch_does(tmp_path):
    """aten::scaled_dot_product_attention calling itself through the dispatcher: torch counts one
    call (the outer), whose children are the inner one's. Expected numbers worked out by hand."""
    trace = write(tmp_path / "t.json", [
        event("aten::scaled_dot_product_attention", 1_000_000, 100_000),       # outer: 100 us
        event("aten::scaled_dot_product_attention", 1_010_000, 80_000),        # inner: dropped
        event("aten::_flash_attention_forward", 1_020_000, 50_000),            # 50 us
        event("cudaLaunchKernel", 1_030_000, 10_000, cat="cuda_runtime"),      # 10 us, in flash
        event("aten::empty", 1_080_000, 5_000),                                # 5 us, in inner
        event("aten::add", 1_200_000, 30_000),                                 # a root: 30 us
        event("aten::add", 1_205_000, 10_000),                                 # nested add, not only child
        event("aten::mul", 1_220_000, 5_000),                                  # its sibling
        event("aten::is_leaf", 1_226_000, 1_000),                              # torch leaves it out
        event("flash_fwd_kernel", 1_040_000, 70_000, cat="kernel", tid=7, pid=0),
    ])
    found = ops(torch_trace.read(trace))
    assert found["aten::scaled_dot_product_attention"] == (1, 100_000.0, 100_000.0 - 50_000 - 5_000)
    assert found["aten::_flash_attention_forward"] == (1, 50_000.0, 40_000.0)
    assert found["aten::empty"] == (1, 5_000.0, 5_000.0)
    # two add events nested but the outer has two children: both count, as in key_averages
    assert found["aten::add"] == (2, 40_000.0, (30_000.0 - 10_000 - 5_000) + 10_000)
    assert "aten::is_leaf" not in found
    assert found == torch_key_averages(json.loads(trace.read_text())["traceEvents"])


def random_trace(rng, count, order="shuffled"):
    """Random nesting, shared names, same-name chains, ties, runtime children, several threads."""
    names = ["aten::a", "aten::b", "aten::c", "aten::is_leaf"]
    events = []

    def grow(start, end, depth, tid, parent_name):
        t = start
        while t < end - 2 and len(events) < count:
            length = rng.randint(1, max(1, min(end - t, 2_000_000 >> depth)))
            if rng.random() < 0.3 and parent_name:
                name = parent_name  # the dispatcher pattern
            else:
                name = rng.choice(names)
            cat = "cuda_runtime" if rng.random() < 0.15 else "cpu_op"
            events.append(event(name, t, length, cat=cat, tid=tid))
            if depth < 5 and length > 3:
                grow(t + rng.randint(0, 1), t + length - rng.randint(0, 1), depth + 1, tid, name)
            t += length + rng.choice((0, 0, 1, 500))

    base = 4_444_282_165_212_637
    for tid in (1, 2):
        grow(base, base + 40_000_000, 0, tid, None)
    if order == "shuffled":
        rng.shuffle(events)  # the reader must not rely on file order
    else:  # kineto's: a thread's operators by start, then the runtime calls by start
        events.sort(key=lambda e: (e["cat"] != "cpu_op", e["ts"]))
    return events


@pytest.mark.parametrize("order", ["shuffled", "kineto"])
@pytest.mark.parametrize("seed", range(5))
def test_operators_match_torch_semantics_on_random_nesting(tmp_path, seed, order):
    events = random_trace(random.Random(seed), 600, order)
    trace = write(tmp_path / "t.json", events)
    assert ops(torch_trace.read(trace)) == torch_key_averages(events)


def test_chunked_parallel_stdlib_and_gzip_reads_are_identical(tmp_path, fixtures):
    """Tiny chunks (many cuts), names that look like event separators (`}, {` inside strings, so
    some guessed cuts are wrong), workers, the stdlib decoder, and the same file gzipped."""
    rng = random.Random(3)
    events = random_trace(rng, 1500)
    for i, e in enumerate(events[::7]):
        e["name"] = 'odd }, {"ph": "X"} name ' + str(i % 5)
    events.append(event("gemm", 5_000, 2_000, cat="kernel", tid=7, pid=0))
    events.append(event("Memcpy HtoD", 9_000, 1_000, cat="gpu_memcpy", tid=7, pid=0))
    plain = write(tmp_path / "t.json", events, traceName="x", deviceProperties=[{"id": 0}, {"id": 1}])
    zipped = tmp_path / "rank0.pt.trace.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))

    def everything(tables):
        return (ops(tables), {n: (s.calls, s.total, s.minimum, s.maximum) for n, s in tables.kernels.items()},
                {n: (s.calls, s.total) for n, s in tables.memory_copies.items()},
                {n: (s.calls, s.total) for n, s in tables.api.items()})

    expected = everything(torch_trace.read(plain))
    assert expected[0] == torch_key_averages(events)
    for fast in (True, False):
        for workers in (1, 2):
            for chunk in (2_000, 7_777, None):
                partial = chrome_stream.read_trace(plain, fast=fast, workers=workers, chunk=chunk)
                assert chrome_tree.operator_sums(partial).keys() == expected[0].keys()
                assert everything(torch_trace.read(plain, fast=fast, workers=workers)) == expected
                partial = chrome_stream.read_trace(zipped, fast=fast, workers=workers, chunk=chunk)
                assert partial.events == len(events)
    assert everything(torch_trace.read(zipped)) == expected
    assert torch_trace.is_chrome_trace(zipped)
    assert everything(read_path(zipped, [torch_trace.ChromeTraceReader()])) == expected


def test_h200_trace_kernels_api_and_operators(fixtures):
    tables = torch_trace.read(fixtures / H200)
    gemm = kernel_rows(tables.kernels)[0]
    assert gemm.calls == 5 and gemm.total_ns == 13_345_377.0 and gemm.mean_ns == pytest.approx(2_669_075.4)
    api = {r.name: r for r in kernel_rows(tables.api)}
    raw = [e for e in json.loads((fixtures / H200).read_text())["traceEvents"] if e.get("cat") == "cuda_runtime"]
    assert sum(r.calls for r in api.values()) == len(raw) == 108
    assert api["cudaLaunchKernelExC"].calls == sum(e["name"] == "cudaLaunchKernelExC" for e in raw)
    matmul, mm = tables.operators["aten::matmul"], tables.operators["aten::mm"]
    assert (matmul.calls, mm.calls) == (5, 5)
    assert matmul.self_total == matmul.total - mm.total  # each matmul's only child is its mm
    rows = {r.name: r for r in kernel_rows(tables.operators)}
    assert rows["aten::mm"].self_ns == mm.self_total < mm.total
    assert ops(tables) == torch_key_averages(json.loads((fixtures / H200).read_text())["traceEvents"])


def test_bare_array_document_and_empty_events(tmp_path):
    bare = tmp_path / "a.json"
    bare.write_text(json.dumps([event("aten::x", 1000, 500), event("k", 2000, 100, cat="kernel")]))
    tables = torch_trace.read(bare)
    assert ops(tables) == {"aten::x": (1, 500.0, 500.0)} and tables.kernels["k"].calls == 1
    empty = write(tmp_path / "e.json", [])
    assert not torch_trace.read(empty).kernels


# ---------------------------------------------------------------------------------------------
# Broken files: one line naming the file


def one_line(excinfo, path):
    message = str(excinfo.value)
    assert "\n" not in message and str(path) in message
    return message


def test_truncated_gzip_is_one_line(tmp_path, fixtures):
    data = gzip.compress((fixtures / H200).read_bytes())
    cut = tmp_path / "trace.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError) as excinfo:
        torch_trace.read(cut)
    assert "truncated or corrupt gzip" in one_line(excinfo, cut)


@pytest.mark.parametrize("fast", [True, False])
def test_events_cut_mid_object_name_the_line(tmp_path, fixtures, fast):
    text = (fixtures / H200).read_text()
    cut = tmp_path / "trace.json"
    cut.write_text(text[: text.index('"cat": "kernel"') + 40])
    with pytest.raises(FormatError) as excinfo:
        torch_trace.read(cut, fast=fast)
    line = text[: text.index('"cat": "kernel"') + 40].count("\n") + 1
    assert one_line(excinfo, cut).startswith(f"{cut}:") and "not valid JSON" in str(excinfo.value)
    assert int(str(excinfo.value).split(":")[1]) in range(line - 12, line + 1)


def test_file_cut_after_the_events_array(tmp_path, fixtures):
    text = (fixtures / H200).read_text()
    cut = tmp_path / "trace.json"
    cut.write_text(text[: text.rindex('"traceName"')])
    with pytest.raises(FormatError) as excinfo:
        torch_trace.read(cut)
    assert "not valid JSON after the events" in one_line(excinfo, cut)


@pytest.mark.parametrize("dur", [None, "fast", [1], {"us": 3}])
@pytest.mark.parametrize("fast", [True, False])
def test_non_numeric_or_null_dur(tmp_path, dur, fast):
    trace = write(tmp_path / "t.json", [event("aten::x", 1000, 500), {**event("gemm", 2000, 10, cat="kernel"), "dur": dur}])
    with pytest.raises(FormatError) as excinfo:
        torch_trace.read(trace, fast=fast)
    assert "gemm" in one_line(excinfo, trace) and "non-numeric dur" in str(excinfo.value)


def test_numeric_string_dur_is_read_as_before(tmp_path):
    trace = write(tmp_path / "t.json", [{**event("gemm", 2000, 10, cat="kernel"), "dur": "1.5"}])
    assert torch_trace.read(trace).kernels["gemm"].total == 1500.0


def test_not_a_chrome_trace(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"schemaVersion": 1, "events": []}')
    with pytest.raises(FormatError, match="no traceEvents list"):
        torch_trace.read(other)
    assert not torch_trace.is_chrome_trace(other)
