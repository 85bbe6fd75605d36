"""Collectives call by call: sizes, nccl-tests' bandwidths, exposed or hidden behind compute, and
each call matched across ranks (by torch's Seq, else by order) with who arrived last, on two rank
traces written here in Kineto's layout (record_param_comms ranges and NCCL kernels carrying the same
args, as torch/csrc/profiler/util.h and libkineto's output_json.cpp write them; each trace with its
own baseTimeNanoseconds); and the NCCL inspector plugin's JSON lines."""

import json
from pathlib import Path

import pytest

from profilectl.analysis import collective_calls
from profilectl.backends import READERS
from profilectl.formats import nccl_inspector, torch_trace
from profilectl.formats.reader import read_path

MB = 1 << 20
BASE = 1_764_000_000_000_000_000  # ns since the epoch: Kineto's baseTimeNanoseconds


def comm_args(name, seq, in_n, out_n, dtype, size=2, with_seq=True):
    args = {"Collective name": name, "Process Group Name": "0", "Process Group Description": "default_pg",
            "In msg nelems": in_n, "Out msg nelems": out_n, "Group size": size, "dtype": dtype,
            "Process Group Ranks": "[0, 1]", "In split size": "[]", "Out split size": "[]"}
    if with_seq:
        args["Seq"] = seq
    return args


# (name, seq, in elements, out elements, dtype, kernel, rank 0's kernel start and length, rank 1's) in µs
CALLS = [("allreduce", 1, MB, MB, "Float", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", (200, 1000), (500, 700)),
         ("_allgather_base", 2, 1024, 2048, "BFloat16", "ncclDevKernel_AllGather_RING_LL", (2000, 50), (2000, 60)),
         ("_reduce_scatter_base", 3, 4096, 2048, "BFloat16", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
          (3000, 80), (3040, 40)),
         ("broadcast", 4, 16, 16, "Long", "ncclDevKernel_Broadcast_RING_LL", (4000, 10), (4000, 10))]


def rank_trace(path: Path, rank: int, base_ns: int, with_seq=True) -> Path:
    """One rank's trace: a compute kernel [100, 400) µs (rank 0) and the collectives of CALLS, each a
    record_param_comms range on the host, a launch and the NCCL kernel on its own stream."""
    shift_us = (base_ns - BASE) / 1000  # this rank's timestamps count from its own base
    events = [{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16", "pid": 0, "tid": 7, "ts": 100 - shift_us,
               "dur": 300 if rank == 0 else 50, "args": {"correlation": 1, "stream": 7}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 90 - shift_us,
               "dur": 5, "args": {"correlation": 1}}]
    for k, (name, seq, in_n, out_n, dtype, kernel, mine0, mine1) in enumerate(CALLS):
        start, length = mine0 if rank == 0 else mine1
        args = comm_args(name, seq, in_n, out_n, dtype, with_seq=with_seq)
        events += [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 9, "tid": 9,
                    "ts": start - 30 - shift_us, "dur": 20, "args": dict(args)},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                    "ts": start - 20 - shift_us, "dur": 5, "args": {"correlation": 10 + k}},
                   {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 20, "ts": start - shift_us,
                    "dur": length, "args": {**args, "correlation": 10 + k, "stream": 20}}]
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2},
                                "traceEvents": events, "baseTimeNanoseconds": base_ns}))
    return path


def two_ranks(tmp_path, with_seq=True):
    rank_trace(tmp_path / "node1-rank0-100.pt.trace.json", 0, BASE, with_seq)
    rank_trace(tmp_path / "node1-rank1-101.pt.trace.json", 1, BASE + 5_000_000, with_seq)  # another base
    tables = read_path(tmp_path, READERS)
    return collective_calls.analyse(tables.collectives, tables.clocks)


@pytest.mark.parametrize("kind,n,factor", [("allreduce", 8, 2 * 7 / 8), ("allgather", 8, 7 / 8),
                                           ("reduce_scatter", 4, 3 / 4), ("alltoall", 8, 7 / 8),
                                           ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("send", 2, 1.0),
                                           ("barrier", 8, None)])
def test_bus_bandwidth_factors_are_nccl_tests(kind, n, factor):
    assert collective_calls.busbw_factor(kind, n) == (pytest.approx(factor) if factor is not None else None)


def test_each_call_sizes_bandwidths_and_what_compute_hid(tmp_path):
    result = two_ranks(tmp_path)
    rows = {(r.rank, r.kind): r for r in result.calls}
    assert {r.side for r in result.calls} == {"gpu"}  # the kernels, not the host ranges
    allreduce = rows["0", "allreduce"]
    assert (allreduce.bytes, allreduce.duration_ns, allreduce.sequence) == (4 * MB, 1_000_000, 1)
    assert allreduce.algbw == pytest.approx(4 * MB / 1e-3)
    assert allreduce.busbw == pytest.approx(allreduce.algbw * 2 * (2 - 1) / 2)
    # the compute kernel [100, 400) µs covers [200, 400) of the allreduce [200, 1200)
    assert (allreduce.hidden_ns, allreduce.exposed_ns) == (200_000, 800_000)
    gather = rows["0", "allgather"]  # nccl-tests' S for allgather: the whole output
    assert gather.bytes == 2048 * 2 and gather.busbw == pytest.approx(gather.algbw * 1 / 2)
    scatter = rows["1", "reduce_scatter"]  # ... for reduce_scatter: the whole input
    assert scatter.bytes == 4096 * 2 and scatter.algbw == pytest.approx(8192 / 40e-6)
    assert rows["1", "allreduce"].hidden_ns == 0  # rank 1's compute ended before
    kinds = {(k.kind, k.bytes): k for k in result.kinds}
    assert kinds["allreduce", 4 * MB].calls == 2 and kinds["allreduce", 4 * MB].total_ns == 1_700_000
    assert kinds["allreduce", 4 * MB].exposed_ns == 800_000 + 700_000


@pytest.mark.parametrize("with_seq,matched_by", [(True, "seq"), (False, "order")])
def test_calls_matched_across_ranks_name_the_last_to_arrive(tmp_path, with_seq, matched_by):
    result = two_ranks(tmp_path, with_seq)
    assert "baseTimeNanoseconds" in result.clock
    matched = {m.kind: m for m in result.matched}
    assert {m.matched_by for m in result.matched} == {matched_by} and len(matched) == 4
    allreduce = matched["allreduce"]
    # rank 1 started its allreduce 300 µs after rank 0 (on the common clock, its base 5 ms later)
    assert (allreduce.first_rank, allreduce.last_rank, allreduce.lag_ns) == ("0", "1", 300_000)
    assert allreduce.transfer_ns == 700_000 and allreduce.algbw == pytest.approx(4 * MB / 700e-6)
    assert matched["reduce_scatter"].last_rank == "1" and matched["reduce_scatter"].lag_ns == 40_000
    assert matched["broadcast"].lag_ns == 0
    late = {(r.rank, r.kind): (r.late_ns, r.last) for r in result.calls}
    assert late["1", "allreduce"] == (300_000, True) and late["0", "allreduce"] == (0, False)
    assert matched["allgather"].last_rank == ""  # both in at the same moment: nobody was last
    (one, two) = result.last_arrivals
    assert (one.rank, one.calls, one.last, one.lag_ns, one.median_lag_ns) == ("1", 4, 2, 340_000, 170_000)
    assert (two.rank, two.last, two.lag_ns, two.median_lag_ns) == ("0", 0, 0, None)


def test_the_section_names_the_last_rank(tmp_path):
    from profilectl.report.sections import build_document
    from profilectl.read.summary import SourceInfo, build
    rank_trace(tmp_path / "node1-rank0-100.pt.trace.json", 0, BASE)
    rank_trace(tmp_path / "node1-rank1-101.pt.trace.json", 1, BASE + 5_000_000)
    summary = build(read_path(tmp_path, READERS), SourceInfo(kind="chrome-trace", path=str(tmp_path)))
    section = next(s for s in build_document(summary).sections if s.key == "collective_calls")
    assert [t.key for t in section.tables] == ["collective_kinds", "collective_calls", "collective_matched",
                                               "collective_last_arrivals"]
    last = next(f for f in section.findings if f.verdict == "last-to-arrive")
    assert last.sentence.startswith("rank 1 arrived last at 2 of 4 matched collective calls, holding the others "
                                    "340.0 µs in all (median 170.0 µs a call)")


def test_a_real_single_rank_trace_sizes_and_exposure():
    """HTA's NCCL trace (torch 2.3, rank 0 of 2): the kernels' own args, no matching."""
    path = Path(__file__).resolve().parents[1] / "fixtures/hta/nccl_parser_config_nccl_data.trimmed.json.gz"
    tables = torch_trace.read(path)
    result = collective_calls.analyse(tables.collectives, tables.clocks)
    gpu = [c for c in tables.collectives if c.side == "gpu"]
    assert len(result.calls) == len(gpu) and not result.matched
    first = next(c for c in result.calls if c.kind == "allreduce")
    source = next(c for c in gpu if c.name == "allreduce")
    assert first.bytes == source.in_elements * 4 and first.duration_ns == source.end_ns - source.start_ns
    assert first.hidden_ns + first.exposed_ns == first.duration_ns and first.hidden_ns == source.compute_overlap_ns


# ------------------------------------------------------------------ the NCCL/RCCL inspector
RECORD = {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
          "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "profiler_plugin",
                       "dump_timestamp_us": 1748030377748202, "hostname": "example-hostname", "pid": 1639453},
          "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                        "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                        "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099}}


def test_inspector_lines_are_read_as_it_writes_them(tmp_path):
    """The record of ext-profiler/inspector/README.md's example, as one line per record (its exporter
    reads the files line by line), among a line cut short and another kind of record."""
    second = json.loads(json.dumps(RECORD))
    second["coll_perf"].update(coll_sn=1408, coll_exec_time_us=62026)
    log = tmp_path / "example-hostname-pid1639453.log"
    log.write_text("\n".join([json.dumps(RECORD), json.dumps(second), '{"dump_stats": {"colls": 2}}',
                              '{"header": {"id": "0x7f', ""]))
    assert nccl_inspector.recognised(log)
    tables = read_path(tmp_path, READERS)
    assert [(r.kind, r.sequence, r.bytes, r.time_us, r.busbw_gbs, r.rank, r.ranks) for r in tables.inspector] == [
        ("AllReduce", 1407, 17179869184, 61974.0, 485.119099, 2, 8), ("AllReduce", 1408, 17179869184, 62026.0,
                                                                      485.119099, 2, 8)]
    assert any("1 line(s) that are not JSON" in n for n in tables.notes)
    # its busbw is nccl-tests' formula over its own algbw: 2(n-1)/n for 8 ranks
    assert RECORD["coll_perf"]["coll_busbw_gbs"] == pytest.approx(
        RECORD["coll_perf"]["coll_algobw_gbs"] * collective_calls.busbw_factor("allreduce", 8), rel=1e-6)
    from profilectl.report.sections import build_document
    from profilectl.read.summary import SourceInfo, build
    summary = build(tables, SourceInfo(kind="nccl-inspector", path=str(tmp_path)))
    section = next(s for s in build_document(summary).sections if s.key == "collective_calls")
    (row,) = section.tables[0].rows
    assert row[5] == 2 and row[6] == pytest.approx((61974 + 62026) / 2 * 1e3) and row[8] == pytest.approx(485.119099e9)


def test_a_log_that_is_not_the_inspectors_is_not_taken(tmp_path):
    other = tmp_path / "myhost-pid12.log"
    other.write_text("epoch 1 loss 0.5\n")
    assert not nccl_inspector.recognised(other)


def test_a_run_that_turns_the_inspector_on_keeps_its_lines_in_raw(machine):
    from cli_support import cli
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")
    plan = json.loads(cli(machine, "trace", "--dry-run", "--json", "--backend", "torch", "--env",
                          "NCCL_INSPECTOR_ENABLE=1", "--", "python3", "train.py").stdout)
    env = plan["phases"][0]["environment"]
    assert env["NCCL_INSPECTOR_DUMP_DIR"].endswith("/raw/nccl-inspector") and env["NCCL_INSPECTOR_ENABLE"] == "1"
    plain = json.loads(cli(machine, "trace", "--dry-run", "--json", "--backend", "torch", "--", "python3",
                           "train.py").stdout)
    assert "NCCL_INSPECTOR_DUMP_DIR" not in plain["phases"][0]["environment"]


def test_the_tables_keep_the_longest_calls_and_count_them_all(tmp_path, monkeypatch):
    monkeypatch.setattr(collective_calls, "CALLS_KEPT", 3)
    monkeypatch.setattr(collective_calls, "MATCHED_KEPT", 1)
    result = two_ranks(tmp_path)
    assert [(c.rank, c.kind) for c in result.calls] == [("0", "allreduce"), ("0", "reduce_scatter"), ("1", "allreduce")]
    assert [m.kind for m in result.matched] == ["allreduce"]
    assert sum(k.calls for k in result.kinds) == 8 and result.last_arrivals[0].last == 2
    assert "longest 3 of 8 calls" in result.notes[-1]


def test_torch_names_of_collectives_map_to_nccl_tests_kinds():
    """"Collective name" as torch 2.11 wrote it on 2 H200s (bench/nvidia_trace_knows.sh): all_to_all_single
    is "all_to_allv", the fused base calls "_allgather_base" and "_reduce_scatter_base"."""
    assert [collective_calls.kind_of(n) for n in ("all_to_allv", "_allgather_base", "_reduce_scatter_base",
                                                   "allreduce", "broadcast")] == \
        ["alltoall", "allgather", "reduce_scatter", "allreduce", "broadcast"]
