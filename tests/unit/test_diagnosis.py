"""The diagnosis on real runs whose answer is known (issue 19): each case of
bench/workloads/diagnosis_cases.py ran through `profilectl trace` on an H100 (bench/nvidia_diagnosis.sh;
the traces and status files are tests/fixtures/diagnosis/, see tests/fixtures/README.md). Before this
work every one of them but the workload with its own profiler was called "likely launch-bound"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profilectl.analysis import failures
from profilectl.analysis.idle import hta_breakdown, rules
from profilectl.model.timeline import combine
from profilectl.backends.torch_profiler import WORKLOAD_TRACES, TorchProfiler, copy_workload_traces
from profilectl.formats.rank_status import RankStatusReader
from profilectl.formats.torch_trace import read as read_trace
from profilectl.report.sections.diagnosis import diagnosis_section
from profilectl.report.summary import RankSummary, SourceInfo, Summary, build, kernel_time_spread, imbalance_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = FIXTURES / "diagnosis"
MS = 1_000_000


def summary_of(case: str, tmp_path: Path | None = None) -> Summary:
    folder = CASES / case
    if tmp_path is not None:  # read through the torch backend, as a run directory's raw/ is
        raw = tmp_path / "raw"
        shutil.copytree(folder, raw)
        tables = TorchProfiler().read(raw)
    else:
        tables = TorchProfiler().read(folder)
    return build(tables, SourceInfo(kind="run", path=str(folder)))


def top(summary: Summary):
    assert summary.diagnosis is not None and summary.diagnosis.findings
    return summary.diagnosis.findings[0]


def test_launch_bound_loop_of_tiny_kernels_is_launch_bound():
    """150 tiny elementwise kernels per forward: the one case where launch-bound is right."""
    summary = summary_of("launch")
    finding = top(summary)
    assert finding.verdict == "launch-bound", finding.sentence
    assert any("shorter than their launch" in line for line in finding.evidence)
    steady = {c.cause: c for c in summary.diagnosis.steady}
    assert steady["launch"].share > 0.5
    assert summary.timeline.merged.verdict == finding.sentence and summary.timeline.merged.launch_bound


def test_slow_data_loader_is_input_bound():
    summary = summary_of("input")
    finding = top(summary)
    assert finding.verdict == "input-bound", finding.sentence
    assert "DataLoader" in finding.sentence
    assert summary.diagnosis.steady[0].cause == "input" and summary.diagnosis.steady[0].share > 0.8


def test_item_after_every_matmul_is_synchronisation_bound():
    summary = summary_of("item")
    finding = top(summary)
    assert finding.verdict == "synchronisation-bound", finding.sentence
    assert "aten::item" in finding.sentence or "Synchronize" in finding.sentence
    assert not summary.timeline.merged.launch_bound


def test_gloo_ddp_is_communication_bound_with_no_straggler():
    """Two ranks on one GPU over gloo: the GPU waits on gloo:all_reduce on the host; neither rank
    is waited for beyond noise."""
    summary = summary_of("ddp")
    finding = top(summary)
    assert finding.verdict == "communication-bound", finding.sentence
    assert "gloo" in finding.sentence
    found = summary.diagnosis.stragglers
    assert found is not None and found.straggler is None and found.why_none
    assert "no straggler named" in (imbalance_line(summary) or "")


def test_straggler_is_the_rank_the_others_wait_for():
    """Rank 1 sleeps 50 ms before every step: rank 0 waits for it inside every allreduce. GPU time
    does not show it (both ranks run the same kernels); waiting does."""
    summary = summary_of("straggler")
    finding = top(summary)
    assert finding.verdict == "straggler", finding.sentence
    straggler = summary.diagnosis.stragglers.straggler
    assert straggler.rank == "1" and straggler.basis == "host collectives (gloo/MPI)"
    assert 40 * MS <= straggler.lead_ns <= 60 * MS
    assert straggler.steps_led == straggler.steps
    assert imbalance_line(summary) == finding.sentence
    # rank 0's own steady verdict is waiting in collectives, rank 1's is its own (unrecorded) host work
    per_rank = {f.scope.split(",")[0]: f.verdict for f in summary.diagnosis.findings if f.scope and
                f.scope.startswith("rank ")}
    assert per_rank == {"rank 0": "communication-bound", "rank 1": "host-bound"}


def test_crash_names_the_rank_that_failed_first():
    """Rank 1 raises at step 5; rank 0 then fails on the closed connection: rank 1 first, with its
    error line, and rank 0 after it (both traces written)."""
    summary = summary_of("crash")
    finding = top(summary)
    assert finding.verdict == "failure"
    order = summary.diagnosis.failures
    assert order.first.rank == "1" and "fails on purpose at step 5" in (order.first.error or "")
    assert [f.rank for f in order.later] == ["0"] and 0 < order.later[0].after_first_ns < 5_000 * MS
    assert finding.sentence.startswith("rank 1 (vm) failed first at ")
    assert {t.rank for t in summary.diagnosis.ranks} == {"0", "1"}  # rank 0's trace was exported


def test_failure_order_from_status_rows_and_a_stopped_rank():
    rows = [RankSummary(rank="0", kernels=0, dispatches=0, total_ns=0, host="a", status="stopped by signal 15",
                        failed_unix_ns=3_000_000_000, signal=15),
            RankSummary(rank="1", kernels=0, dispatches=0, total_ns=0, host="a", status="failed: ValueError: x",
                        failed_unix_ns=2_000_000_000, error="ValueError: x"),
            RankSummary(rank="2", kernels=0, dispatches=0, total_ns=0, host="b", status="ok")]
    found = failures.order(rows)
    assert found.first.rank == "1" and [f.rank for f in found.stopped] == ["0"]
    assert found.stopped[0].after_first_ns == 1_000_000_000
    text = failures.sentence(found)
    assert "rank 1 (a) failed first at 00:00:02.000 UTC: ValueError: x" in text
    assert "stopped by the launcher afterwards: rank 0 (a) (signal 15, 1.000 s later)" in text


def test_compile_dominated_run():
    """torch.compile of a small MLP: seconds of Dynamo/Inductor on the host, the GPU idle meanwhile."""
    summary = summary_of("compile")
    finding = top(summary)
    assert finding.verdict == "compile-dominated", finding.sentence
    whole = {c.cause: c for c in summary.diagnosis.whole}
    assert whole["compile"].idle_ns > 2_000 * MS
    # the steady state after it is judged apart, and is not called compile-bound
    assert summary.diagnosis.findings[1].verdict != "compile-dominated"


def test_workload_with_its_own_profiler_is_read_from_its_traces(tmp_path):
    """The workload starts torch.profiler itself: profilectl's hook stepped aside (its status file
    says at which step and where the workload exported); the run copies those traces into raw/ and
    reads them, and the report says so in one line with the two ways out."""
    raw = tmp_path / "raw"
    shutil.copytree(CASES / "own", raw, ignore=shutil.ignore_patterns("workload-own-traces"))
    exported = tmp_path / "own-traces"
    shutil.copytree(CASES / "own" / "workload-own-traces", exported)
    status = next(raw.glob("rank-*.status.json"))
    doc = json.loads(status.read_text())
    assert doc["own_profiler_step"] == 0 and len(doc["own_traces"]) == 1
    doc["own_traces"] = [str(p) for p in exported.iterdir()]  # where the workload wrote them on this machine
    status.write_text(json.dumps(doc))
    copied = copy_workload_traces(raw)
    assert [p.parent.name for p in copied] == ["workload-traces"] and all(p.is_file() for p in exported.iterdir())
    tables = TorchProfiler().read(raw)
    assert tables.kernels, "the workload's own trace holds its kernels"
    note = next(n for n in tables.notes if n.startswith("the workload runs torch.profiler itself"))
    assert "stepped aside at step 0" in note and "profilectl report" in note
    section = diagnosis_section(build(tables, SourceInfo(kind="run", path=str(raw))))
    assert section is not None and section.findings[0].verdict == "own-profiler"


def test_collision_message_names_both_ways_out():
    from profilectl.execute import _with_collision
    stderr = "RuntimeError: Can't disable Kineto profiler when it's not running\n"
    message = _with_collision("torch ran but produced no readable output: x", "torch", stderr)
    assert "runs torch.profiler itself" in message and "profilectl report" in message
    assert _with_collision("m", "torch", "other error") == "m"


def test_merged_timeline_is_a_union_not_a_sum():
    """Two ranks of about half a second each on one host: the job lasts about half a second."""
    summary = summary_of("ddp")
    timeline = summary.timeline
    spans = [r.span_ns for r in timeline.ranks]
    assert max(spans) <= timeline.merged.span_ns < sum(spans) * 0.6
    assert timeline.merged.busy_ns <= sum(r.busy_ns for r in timeline.ranks)


def test_kernel_time_spread_is_relative_to_the_least_and_names_no_slowest_rank():
    ranks = (RankSummary(rank="0", kernels=1, dispatches=1, total_ns=100.0),
             RankSummary(rank="1", kernels=1, dispatches=1, total_ns=107.3))
    spread = kernel_time_spread(ranks)
    assert (spread.most, spread.least) == ("1", "0")
    assert spread.percent == pytest.approx(7.3)  # (107.3 - 100) / 100, as compare divides by its base
    line = imbalance_line(Summary(source=SourceInfo(kind="x", path="y"), kernel_time_spread=spread))
    assert "7.3 % more than rank 0 (relative to the least" in line and "names no straggler" in line
    assert "slowest" not in line and "fastest" not in line


def test_summary_with_diagnosis_round_trips(tmp_path):
    summary = summary_of("straggler")
    summary.write(tmp_path / "summary.json")
    assert Summary.read(tmp_path / "summary.json") == summary
    section = diagnosis_section(summary)
    keys = [t.key for t in section.tables]
    assert keys == ["steady_state", "idle_causes", "idle_steps", "rank_waits", "hta_idle"]
    assert section.findings[0].verdict == "straggler" and section.findings[0].next_step


def test_rank_status_reader_keeps_failure_time_and_signal(tmp_path):
    path = tmp_path / "rank-0-node-12.status.json"
    path.write_text(json.dumps({"rank": "0", "host": "node", "exit_code": 143, "error": None, "signal": 15,
                                "failed_unix_ns": 123}))
    row = RankStatusReader().read_file(path).ranks[0]
    assert (row.status, row.signal, row.failed_unix_ns, row.error) == ("stopped by signal 15", 15, 123, None)


def test_every_cause_rule_says_why_and_what_next():
    r = rules()
    assert [c.key for c in r.causes][-4:] == ["launch", "host", "untraced", "unrecorded"]
    for cause in r.causes:
        assert cause.reason and cause.next_step and cause.verdict
    for name in ("gap_min", "launch_gap", "cover", "sync_tolerance", "busy_ok", "straggler_min"):
        assert r[f"{name}_reason"]


# HTA 0.5.0's get_idle_time_breakdown on its own test traces (tests/fixtures/hta/), with
# include_last_profiler_step=True (HTA's default leaves the last step's kernels out), in µs per stream:
# (host wait, kernel wait, other). Recorded by running HTA itself (docs/validation.md).
HTA_IDLE_US = {
    "critical_path_alexnet_trace.json.gz": {"7": (12855007, 104, 0), "20": (12011718, 3, 0)},
    "critical_path_simple_add_trace.json.gz": {"7": (15976739, 91, 0), "20": (13582776, 8, 0)},
    "trace_filter_sampled_rank-0.json.gz": {"7": (397917, 3765, 598335), "23": (1214793, 160, 34),
                                            "25": (560120, 35, 100413), "84": (794901, 6, 3142),
                                            "203": (558073, 0, 0)},
}


@pytest.mark.parametrize("name", sorted(HTA_IDLE_US))
def test_idle_breakdown_equals_htas_on_its_own_traces(name):
    timeline = combine(read_trace(FIXTURES / "hta" / name).timelines)[0]
    ours = {h.stream.split(":")[-1]: (h.host_wait_ns, h.kernel_wait_ns, h.other_ns) for h in hta_breakdown(timeline)}
    for stream, (host_wait, kernel_wait, other) in HTA_IDLE_US[name].items():
        assert ours[stream] == (host_wait * 1000, kernel_wait * 1000, other * 1000), stream


SYSTEM_PYTHON = "/usr/bin/python3"


def _system_torch() -> bool:
    import os
    import subprocess
    return os.access(SYSTEM_PYTHON, os.X_OK) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch.profiler"], capture_output=True).returncode == 0


OWN_PROFILER_WORKLOAD = """
import os, sys, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
out = sys.argv[1]
model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
             on_trace_ready=tensorboard_trace_handler(out)) as prof:
    for step in range(6):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        prof.step()
print("own profiler: done")
"""


@pytest.mark.skipif(not _system_torch(), reason="needs Debian's python3-torch at /usr/bin/python3 "
                                                "(tools/install-host-deps installs it)")
def test_a_real_workload_running_its_own_profiler_gets_it_and_is_read(machine, tmp_path):
    """A real process (CPU torch): the start-up hook steps aside when the workload starts its own
    torch.profiler, no collision, and the run reads the trace the workload exported."""
    from cli_support import json_run
    script = tmp_path / "own.py"
    script.write_text(OWN_PROFILER_WORKLOAD)
    exported = tmp_path / "exported"
    result, run = json_run(machine, "trace", "--", SYSTEM_PYTHON, str(script), str(exported), timeout=300)
    assert "Can't disable Kineto" not in (run / "stderr.log").read_text()
    assert result["status"] == "ok", result["message"]
    written = sorted(exported.iterdir())
    copied = sorted((run / "raw" / WORKLOAD_TRACES).iterdir())
    assert written and len(copied) == len(written)  # copied, the user's own files left where they are
    status = json.loads(next((run / "raw").glob("rank-*.status.json")).read_text())
    assert status["own_profiler_step"] == 0 and status["own_traces"] == [str(p) for p in written]
    assert any(n.startswith("the workload runs torch.profiler itself") for n in result["summary"]["notes"])


def write_kernel_only_run(folder: Path, with_launch_calls: bool, with_steps: bool = False) -> None:
    """One process's rocprofv3 kernel trace: 50 kernels of 100 µs with 1 ms between them (the GPU
    idle 90 %), and, where asked, the HIP launch call of each kernel or ROCTx step ranges (host
    events)."""
    folder.mkdir(parents=True)
    if with_steps:
        (folder / "7_marker_api_trace.csv").write_text(
            '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n' +
            "".join(f'"MARKER_CORE_RANGE_API","ProfilerStep#{i}",7,7,{1000 + i},{1_000_000_000 + i * 11_000_000},'
                    f'{1_000_000_000 + (i + 1) * 11_000_000 - 1}\n' for i in range(5)))
    kernels = ['"Kind","Agent_Id","Queue_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"']
    calls = ['"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"']
    for i in range(50):
        start = 1_000_000_000 + i * 1_100_000
        kernels.append(f'"KERNEL_DISPATCH","Agent 4",1,"gemm",{i + 1},{start},{start + 100_000}')
        calls.append(f'"HIP_RUNTIME_API","hipLaunchKernel",7,7,{i + 1},{start - 20_000},{start - 10_000}')
    (folder / "7_kernel_trace.csv").write_text("\n".join(kernels) + "\n")
    if with_launch_calls:
        (folder / "7_hip_api_trace.csv").write_text("\n".join(calls) + "\n")


@pytest.mark.parametrize("with_launch_calls,with_steps", [(False, False), (True, False), (False, True)])
def test_gaps_a_trace_cannot_explain_are_not_blamed_on_python(tmp_path, with_launch_calls, with_steps):
    """A GPU-only trace (a rocprofv3 kernel trace alone) says the host side is not in it and how to
    trace it, instead of naming Python between torch calls; with the launch calls or ROCTx ranges
    recorded, the gaps are host work between recorded calls."""
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    write_kernel_only_run(tmp_path / "run", with_launch_calls, with_steps)
    summary = build(read_path(tmp_path / "run", READERS), SourceInfo(kind="folder", path=str(tmp_path / "run")))
    finding = top(summary)
    assert finding.verdict == "host-bound"
    assert "Python" not in finding.sentence.split(":")[0]
    cause = summary.diagnosis.steady[0]
    assert cause.share > 0.98
    if with_launch_calls or with_steps:
        assert cause.cause == "unrecorded" and "code between its recorded calls" in finding.sentence
    else:
        assert cause.cause == "untraced" and "cause not in the trace" in finding.sentence
        assert "--sys-trace" in finding.next_step
