"""GPU memory from torch's memory history (trace --memory): the snapshot read safely, replayed by
hand (peak, what held it, allocated against reserved, the allocations alive at an out-of-memory
error and the code that made them), the start-up hook's writer, and the report's section and chart.

The snapshots are written here in torch's own layout (torch/cuda/memory.py `_snapshot`'s documented
TypedDicts: segments with blocks, device_traces of alloc/free_requested/free_completed/segment_alloc/
segment_free/oom entries with Python frames innermost first), pickled as `_dump_snapshot` pickles
them: no real CUDA snapshot can be made on this machine."""

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

from profilectl.formats import memory_history as memory
from profilectl.errors import FormatError
from profilectl.formats import torch_memory

MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]
TORCH = "/usr/lib/python3/dist-packages/torch"
MODULE = f"{TORCH}/nn/modules/module.py"


def frames(*names):
    return [{"filename": f, "line": line, "name": n} for f, line, n in names]


FORWARD = frames((f"{TORCH}/nn/functional.py", 2000, "linear"), ("/home/u/train.py", 41, "forward"),
                 (MODULE, 1500, "_call_impl"), ("/home/u/train.py", 80, "main"))
PARAMS = frames((MODULE, 900, "_apply"), (MODULE, 1100, "to"), ("/home/u/train.py", 70, "main"))
OPTIM = frames((f"{TORCH}/optim/adam.py", 120, "_init_group"), ("/home/u/train.py", 90, "main"))
BACKWARD_PY = frames((f"{TORCH}/autograd/graph.py", 768, "_engine_run_backward"), ("/home/u/train.py", 85, "main"))
USER = frames(("/home/u/train.py", 60, "main"))


def entry(action, addr, size, frames_=(), at=None, **more):
    made = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": list(frames_), **more}
    if at is not None:
        made["time_us"] = at
    return made


def block(address, size, state, frames_=()):
    return {"address": address, "size": size, "requested_size": size, "state": state, "frames": list(frames_)}


def snapshot(trace, blocks, total=64 * MiB, extra=None):
    segment = {"device": 0, "address": 0, "total_size": total, "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "allocated_size": 0, "active_size": 0, "blocks": blocks}
    made = {"segments": [segment], "device_traces": [trace], "allocator_settings": {}}
    if extra:
        made["profilectl"] = extra
    return made


# A training step that ran out of memory: a parameter before the history began, a 64 MiB segment,
# an activation, a backward allocation without a Python frame, a freed activation, the optimizer's
# state, then a 512 MiB request that failed
TRACE = [
    entry("segment_alloc", 0, 64 * MiB, PARAMS, at=1_000_000),
    entry("alloc", 8 * MiB, 16 * MiB, FORWARD, at=1_000_100),
    entry("alloc", 24 * MiB, 8 * MiB, (), at=1_000_200),
    entry("free_requested", 8 * MiB, 16 * MiB, (), at=1_000_300),
    entry("free_completed", 8 * MiB, 16 * MiB, (), at=1_000_400),
    entry("alloc", 32 * MiB, 16 * MiB, OPTIM, at=1_000_500),
    entry("alloc", 48 * MiB, 4 * MiB, BACKWARD_PY, at=1_000_600),
    {"action": "oom", "size": 512 * MiB, "stream": 0, "device_free": 100 * MiB, "frames": FORWARD,
     "time_us": 1_000_700},
]
BLOCKS = [block(0, 8 * MiB, "active_allocated", PARAMS), block(8 * MiB, 16 * MiB, "inactive"),
          block(24 * MiB, 8 * MiB, "active_allocated"), block(32 * MiB, 16 * MiB, "active_allocated", OPTIM),
          block(48 * MiB, 4 * MiB, "active_allocated", BACKWARD_PY), block(52 * MiB, 12 * MiB, "inactive")]


def write(tmp_path, value, name="node1-rank3-4242.memory.pickle"):
    path = tmp_path / name
    with open(path, "wb") as fh:
        pickle.dump(value, fh)
    return path


def test_replay_by_hand(tmp_path):
    path = write(tmp_path, snapshot(TRACE, BLOCKS, extra={"max_allocated": {"0": 36 * MiB}}))
    assert torch_memory.recognised(path)
    (report,) = torch_memory.read(path).memory
    # allocated at the end: 8 + 8 + 16 + 4 = 36 MiB; the history made 16 + 8 + 16 + 4 = 44 and freed 16:
    # 8 MiB (the parameter) was there before it began
    assert report.rank == "3" and report.events == len(TRACE) and report.time_basis == "seconds"
    assert [(p.allocated // MiB, p.reserved // MiB) for p in report.series] == [
        (8, 0), (8, 64), (24, 64), (32, 64), (32, 64), (16, 64), (32, 64), (36, 64), (36, 64)]
    assert report.peak_allocated == 36 * MiB == report.torch_max_allocated and not report.notes
    assert report.peak_at == pytest.approx(600e-6) and report.reserved_at_peak == report.peak_reserved == 64 * MiB
    shares = {s.category: (s.bytes // MiB, s.allocations) for s in report.by_category}
    assert shares == {"optimizer state": (16, 1), "gradients": (12, 2), "parameters": (8, 1)}
    failure = report.failure
    assert (failure.requested, failure.device_free) == (512 * MiB, 100 * MiB)
    assert (failure.allocated, failure.reserved) == (36 * MiB, 64 * MiB)
    assert failure.requested_by == "train.py:41 in forward"
    assert [(a.bytes // MiB, a.category, a.made_by) for a in failure.largest] == [
        (16, "optimizer state", "train.py:90 in main"), (8, "parameters", "train.py:70 in main"),
        (8, "gradients", ""), (4, "gradients", "train.py:85 in main")]
    assert failure.largest[0].stack.startswith("adam.py:120 _init_group < train.py:90 main")


def test_the_peak_is_the_largest_allocated_and_what_held_it_then(tmp_path):
    trace = [entry("segment_alloc", 0, 64 * MiB, PARAMS), entry("alloc", 0, 8 * MiB, PARAMS),
             entry("alloc", 8 * MiB, 40 * MiB, FORWARD), entry("free_completed", 8 * MiB, 40 * MiB),
             entry("alloc", 8 * MiB, 4 * MiB, USER)]
    (report,) = memory.analyse(snapshot(trace, [block(0, 8 * MiB, "active_allocated", PARAMS),
                                                block(8 * MiB, 4 * MiB, "active_allocated", USER)]), "0", "s")
    assert report.time_basis == "event" and report.peak_allocated == 48 * MiB and report.peak_at == 2.0
    assert {s.category: s.bytes // MiB for s in report.by_category} == {"activations": 40, "parameters": 8}
    assert report.failure is None


def test_allocations_from_before_the_history_are_named_so(tmp_path):
    trace = [entry("alloc", 32 * MiB, 8 * MiB, FORWARD)]
    blocks = [block(0, 16 * MiB, "active_allocated"), block(32 * MiB, 8 * MiB, "active_allocated", FORWARD)]
    (report,) = memory.analyse(snapshot(trace, blocks, extra={"max_allocated": {"0": 30 * MiB}}), "0", "s")
    assert report.peak_allocated == 24 * MiB
    assert {s.category: s.bytes // MiB for s in report.by_category} == {"before the history": 16, "activations": 8}
    assert "max_memory_allocated() says" in report.notes[0]


@pytest.mark.parametrize("frames_,category", [
    (OPTIM, "optimizer state"), (BACKWARD_PY, "gradients"), ([], "gradients"), (PARAMS, "parameters"),
    (frames((f"{TORCH}/nn/modules/linear.py", 100, "__init__"), ("/x/m.py", 3, "build")), "parameters"),
    (FORWARD, "activations"), (USER, "other"),
    # a rule earlier in the file wins: the optimizer's step inside a module's forward is optimizer state
    (OPTIM + FORWARD, "optimizer state")])
def test_categories_follow_the_rules_in_order(frames_, category):
    assert memory.category_of(frames_) == category


# ------------------------------------------------------------------ reading safely
class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {Boom.marker}",))


def test_a_pickle_that_names_code_is_refused_and_never_run(tmp_path):
    Boom.marker = tmp_path / "ran"
    path = tmp_path / "evil.memory.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "x": Boom()}))
    with pytest.raises(FormatError, match="names posix.system"):
        torch_memory.load(path)
    assert not Boom.marker.exists()
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(tmp_path), "--force"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PROFILECTL_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 2 and "Traceback" not in done.stderr and "names posix.system" in done.stderr
    assert not Boom.marker.exists()


@pytest.mark.parametrize("value,words", [([1, 2], "top level is a list"),
                                          ({"segments": "x", "device_traces": []}, "no list of segments"),
                                          ({"segments": [{"total_size": "big"}], "device_traces": []},
                                           "integer total_size"),
                                          ({"segments": [], "device_traces": [[{"size": 3}]]}, "without an action")])
def test_what_is_not_a_snapshot_says_so_in_one_line(tmp_path, value, words):
    with pytest.raises(FormatError, match=words):
        torch_memory.load(write(tmp_path, value))


def test_truncated_oversized_and_linked_files(tmp_path, monkeypatch):
    whole = pickle.dumps(snapshot(TRACE, BLOCKS))
    cut = tmp_path / "cut.memory.pickle"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(FormatError, match="truncated or damaged"):
        torch_memory.load(cut)
    fine = write(tmp_path, snapshot(TRACE, BLOCKS))
    monkeypatch.setenv("PROFILECTL_MAX_SNAPSHOT_BYTES", "100")
    with pytest.raises(FormatError, match="PROFILECTL_MAX_SNAPSHOT_BYTES"):
        torch_memory.load(fine)
    monkeypatch.delenv("PROFILECTL_MAX_SNAPSHOT_BYTES")
    link = tmp_path / "link.memory.pickle"
    link.symlink_to(fine)
    with pytest.raises(FormatError, match="symbolic link"):
        torch_memory.load(link)


# ------------------------------------------------------------------ the start-up hook writes it
def _hook(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILECTL_TORCH_OPTIONS", json.dumps({"memory_history": 1000}))
    spec = importlib.util.spec_from_file_location(
        "profilectl_hook_under_test", ROOT / "src/profilectl/backends/rank_startup/sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = {}
    made = snapshot(TRACE, BLOCKS)

    def record(**kwargs):
        calls["record"] = kwargs
    cuda = types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 1, max_memory_allocated=lambda d: 36 * MiB,
        max_memory_reserved=lambda d: 64 * MiB,
        memory=types.SimpleNamespace(_record_memory_history=record, _snapshot=lambda: dict(made)))
    torch = types.SimpleNamespace(cuda=cuda, _C=types.SimpleNamespace(
        _cuda_attach_out_of_memory_observer=lambda fn: calls.setdefault("observer", fn)))
    profiler = module._RankProfiler("3", str(tmp_path))
    profiler.torch = torch
    profiler.started = True
    profiler._start_memory_history(torch)
    return profiler, calls


def test_the_hook_records_the_history_and_writes_snapshots_at_oom_and_exit(tmp_path, monkeypatch):
    profiler, calls = _hook(tmp_path, monkeypatch)
    assert calls["record"] == {"enabled": "all", "context": "alloc", "stacks": "python", "max_entries": 1000}
    calls["observer"](0, 512 * MiB, 36 * MiB, 100 * MiB)  # torch calls it when an allocation fails
    calls["observer"](0, 1, 2, 3)  # only the first failure is written
    profiler.finish()
    host, pid = profiler.host, profiler.pid
    oom = tmp_path / f"{host}-rank3-{pid}.oom.memory.pickle"
    at_exit = tmp_path / f"{host}-rank3-{pid}.memory.pickle"
    extra = torch_memory.load(oom)["profilectl"]
    assert extra["oom"] == {"device": 0, "requested": 512 * MiB, "device_allocated": 36 * MiB,
                            "device_free": 100 * MiB}
    assert extra["max_allocated"] == {"0": 36 * MiB} and extra["rank"] == "3"
    (report,) = torch_memory.read(at_exit).memory
    assert report.torch_max_allocated == report.peak_allocated == 36 * MiB and report.rank == "3"
    assert not list(tmp_path.glob("*.tmp"))


def test_trace_memory_and_shapes_reach_the_hook_and_only_torch(machine):
    from cli_support import cli
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")
    done = cli(machine, "trace", "--dry-run", "--json", "--backend", "torch", "--shapes", "--memory", "--",
               "python3", "train.py")
    assert done.returncode == 0, done.stderr
    options = json.loads(json.loads(done.stdout)["phases"][0]["environment"]["PROFILECTL_TORCH_OPTIONS"])
    assert options["record_shapes"] is True and options["memory_history"] == 100_000
    plain = json.loads(cli(machine, "trace", "--dry-run", "--json", "--backend", "torch", "--", "python3",
                           "train.py").stdout)
    assert "memory_history" not in json.loads(plain["phases"][0]["environment"]["PROFILECTL_TORCH_OPTIONS"])
    refused = cli(machine, "trace", "--dry-run", "--backend", "timing", "--shapes", "--", "python3", "train.py")
    assert refused.returncode != 0 and "--shapes need torch.profiler" in refused.stderr


# ------------------------------------------------------------------ the report
def test_the_section_and_its_chart(tmp_path):
    import dataclasses

    from profilectl.report.renderers import html
    from profilectl.report.sections import build_document
    from profilectl.read.summary import SourceInfo, build
    tables = torch_memory.read(write(tmp_path, snapshot(TRACE, BLOCKS)))
    summary = build(tables, SourceInfo(kind="torch-memory-snapshot", path=str(tmp_path)))
    document = build_document(dataclasses.replace(summary))
    section = next(s for s in document.sections if s.key == "memory")
    assert [f.verdict for f in section.findings] == ["out-of-memory", "memory-peak"]
    assert "asking for 512.0 MiB at train.py:41 in forward" in section.findings[0].sentence
    keys = [t.key for t in section.tables]
    assert keys == ["memory_peak", "memory_by_category", "memory_series", "memory_failure", "memory_failure_alive"]
    page = html.render(document)
    chart = page[page.index("GPU memory: allocated against reserved"):]
    assert chart.count("<polyline") == 2 and "rank 3 GPU 0 allocated" in chart and "rank 3 GPU 0 reserved" in chart


def test_memory_and_inspector_records_survive_a_partial(tmp_path):
    import json as _json

    from profilectl.formats import nccl_inspector
    from profilectl.read import partials
    tables = torch_memory.read(write(tmp_path, snapshot(TRACE, BLOCKS)))
    log = tmp_path / "host-pid7.log"
    log.write_text(_json.dumps({"header": {"id": "0x1", "rank": 0, "n_ranks": 2, "nnodes": 1}, "metadata": {},
                                "coll_perf": {"coll": "AllGather", "coll_sn": 1, "coll_msg_size_bytes": 8192,
                                              "coll_exec_time_us": 10, "coll_algobw_gbs": 0.8, "coll_busbw_gbs": 0.4}}))
    tables = tables.merge(nccl_inspector.read(log))
    back = partials.decode(partials.encode(partials.of_tables(tables, tmp_path, ()))).tables()
    assert back.memory == tables.memory and back.inspector == tables.inspector and len(back.inspector) == 1


# ------------------------------------------------------------------ profile_memory events, where that is all there is
FIXTURES = ROOT / "tests/fixtures"


@pytest.mark.parametrize("path", ["real/hta/df_index_resolver.json.gz",
                                  "harness/tracelens_h100_bert-small-uncased__1016001.json.gz"])
def test_profile_memory_events_of_real_traces_by_hand(path):
    """HTA's V100 trace (rank 1, device 1) and TraceLens' H100 bert trace, recorded with
    profile_memory=True: the peak of "Total Allocated" over the GPU's [memory] events, and the
    reserved bytes beside it, as the raw events say."""
    import gzip

    from profilectl.formats import torch_trace
    with gzip.open(FIXTURES / path) as fh:
        doc = json.load(fh)
    events = [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc)
              if e.get("name") == "[memory]" and (e.get("args") or {}).get("Device Type") == 1]
    peak = max(events, key=lambda e: e["args"]["Total Allocated"])
    for fast in (True, False):
        (report,) = torch_trace.read(FIXTURES / path, fast=fast).memory
        assert report.events == len(events) and report.device == peak["args"]["Device Id"]
        assert report.peak_allocated == peak["args"]["Total Allocated"]
        assert report.reserved_at_peak == peak["args"]["Total Reserved"]
        assert report.peak_reserved == max(e["args"]["Total Reserved"] for e in events)
        assert report.by_category == () and "profile_memory events only" in report.notes[0]


def test_an_out_of_memory_event_of_profile_memory(tmp_path):
    from profilectl.formats import torch_trace

    def memory(ts, size, allocated, name="[memory]"):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": size, "Total Allocated": allocated,
                         "Total Reserved": 64 * MiB}}
    events = [memory(10, 8 * MiB, 8 * MiB), memory(20, 16 * MiB, 24 * MiB), memory(30, -16 * MiB, 8 * MiB),
              memory(40, 512 * MiB, 8 * MiB, "[OutOfMemory]"),
              {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 39, "dur": 2}]
    trace = tmp_path / "host-rank0-1.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    (report,) = torch_trace.read(trace).memory
    assert report.peak_allocated == 24 * MiB and report.peak_at == pytest.approx(10e-6)
    assert (report.failure.requested, report.failure.allocated, report.failure.reserved) == (512 * MiB, 8 * MiB,
                                                                                              64 * MiB)
