"""The live view's model and its reading (issue 37, the job while it runs): per rank the last steps'
times and the lag of its step ends behind the earliest rank's, the rank the others wait for, on
synthetic step ends and on the step ends two H200s wrote under DDP (tests/fixtures/nvidia-h200-ddp);
and the monitor reading growing files as a run writes them (partial lines left for the next poll)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profilectl.analysis import live
from profilectl.analysis.live import GpuNow, RankMarks, StepMark, assess, gpu_of, named_since
from profilectl.read.live import LineTail, Monitor, StepsFile, TelemetryFile
from support import REPO

MS = 1_000_000
FIXTURES = REPO / "tests/fixtures/nvidia-h200-ddp"


def ranks_with(lags_ms: dict[str, list[float]], step_ms: float = 30.0) -> list[RankMarks]:
    """Ranks stepping every `step_ms`; each rank's k-th step ends lags_ms[rank][k] late (its own
    clock moves with it: a late rank's steps are as long as the others')."""
    out = []
    for pid, (rank, lags) in enumerate(lags_ms.items()):
        out.append(RankMarks(rank, "h", pid + 1, tuple(
            StepMark(step=k + 1, end_unix_ns=int(((k + 1) * step_ms + lag) * MS),
                     end_mono_ns=int(((k + 1) * step_ms + lag) * MS)) for k, lag in enumerate(lags))))
    return out


def test_the_late_rank_is_named_with_its_lag_and_its_step():
    state = assess(ranks_with({"0": [0.0] * 10, "1": [20.0] * 10, "2": [1.0] * 10}), (), 0)
    assert state.straggler is not None and state.straggler.rank == "1"
    assert state.straggler.lag_ns == 20 * MS and state.straggler.step_ns == 30 * MS
    assert (state.straggler.first_step, state.straggler.last_step, state.common_step) == (6, 10, 10)
    assert state.verdict == ("rank 1 is the one the others wait for: its steps end 20.0 ms after the earliest rank's "
                             "(median of the last 5 steps, 6 to 10; its step 30.0 ms)")
    assert [(r.rank, r.lag_ns, r.median_step_ns, r.last_step) for r in state.ranks] == [
        ("0", 0, 30 * MS, 10), ("1", 20 * MS, 30 * MS, 10), ("2", 1 * MS, 30 * MS, 10)]


def test_the_lag_is_behind_the_earliest_rank_whichever_it_is():
    state = assess(ranks_with({"0": [25.0] * 8, "1": [0.0] * 8}), (), 0)
    assert state.straggler is not None and state.straggler.rank == "0" and state.straggler.lag_ns == 25 * MS
    assert [r.lag_ns for r in state.ranks] == [25 * MS, 0]


def test_equal_ranks_name_no_one_and_say_why():
    state = assess(ranks_with({"0": [0.0] * 10, "1": [0.5] * 10}), (), 0)
    assert state.straggler is None
    assert "no straggler: the largest lag is rank 1's, 0.5 ms" in state.verdict and "40% of its step 30.0 ms" in state.verdict


def test_the_lag_is_judged_on_steps_every_rank_ended():
    # rank 1 is three steps behind: only steps 1-7 are common, and it is named on those
    ranks = ranks_with({"0": [0.0] * 10, "1": [20.0] * 7})
    state = assess(ranks, (), 0)
    assert state.common_step == 7 and state.straggler is not None and state.straggler.last_step == 7
    assert [r.last_step for r in state.ranks] == [10, 7]


def test_one_rank_or_too_few_steps_name_no_one():
    assert assess(ranks_with({"0": [0.0] * 10}), (), 0).verdict == "one rank stepping so far: no straggler to name"
    few = assess(ranks_with({"0": [0.0] * 3, "1": [20.0] * 3}), (), 0)
    assert few.straggler is None and "3 steps ended by every rank are needed after the first 2 (warm-up), 1 so far" \
        in few.verdict


def test_a_straggler_that_appears_is_named_within_three_steps_and_since_when():
    lags = [0.0] * 10 + [20.0] * 10  # rank 1 starts lagging at step 11
    ranks = ranks_with({"0": [0.0] * 20, "1": lags})
    named = [step for step in range(5, 21)
             if assess([RankMarks(r.rank, r.host, r.pid, r.marks[:step]) for r in ranks], (), 0).straggler]
    assert named[0] == 13 and named == list(range(13, 21))  # 3 of the last 5 steps lag from step 13 on
    assert named_since(ranks, "1") == 13 and named_since(ranks, "0") is None


@pytest.mark.parametrize("local, visible, gpu", [(1, None, 1), (1, "2,3", 3), (0, "GPU-uuid-a,GPU-uuid-b", None),
                                                  (2, "0,1", None), (None, "0,1", None), (0, "", None)])
def test_a_rank_uses_the_local_rank_th_visible_gpu(local, visible, gpu):
    assert gpu_of(local, visible) == gpu


def test_each_rank_shows_its_gpu_and_the_others_are_shown_apart():
    ranks = [RankMarks(r.rank, r.host, r.pid, r.marks, gpu=int(r.rank)) for r in ranks_with({"0": [0] * 6, "1": [0] * 6})]
    gpus = [GpuNow("h", g, 1, busy_pct=90.0 + g, power_w=400.0 + g) for g in (0, 1, 2)]
    state = assess(ranks, gpus, 0)
    assert [(r.gpu.gpu, r.gpu.busy_pct, r.gpu.power_w) for r in state.ranks if r.gpu] == [(0, 90.0, 400.0),
                                                                                            (1, 91.0, 401.0)]
    from profilectl.report.live import line
    text = line(state)
    assert "rank 0: step 30.0 ms, lag 0.0 ms, GPU 0 90% 400 W" in text and "| GPU 2 92% 402 W |" in text


def fixture_ranks(kind: str) -> list[RankMarks]:
    """The hook's status files of a real DDP run on two H200s: step ends from perf_counter_ns, which is
    CLOCK_MONOTONIC on Linux, one clock for every process of the host (the ranks' ends compare)."""
    out = []
    for path in sorted((FIXTURES / kind).glob("rank-*.status.json")):
        doc = json.loads(path.read_text())
        out.append(RankMarks(doc["rank"], doc["host"], doc["pid"], tuple(
            StepMark(step=k + 1, end_unix_ns=end, end_mono_ns=end) for k, end in enumerate(doc["step_ends_ns"]))))
    return out


def every_window(ranks: list[RankMarks]) -> list[live.LiveState]:
    return [assess([RankMarks(r.rank, r.host, r.pid, r.marks[:n]) for r in ranks], (), 0) for n in range(1, 31)]


def test_on_real_ddp_the_sleeping_rank_is_named_from_its_fifth_step_and_identical_ranks_never():
    slow = every_window(fixture_ranks("slow"))  # rank 1 slept 50 ms on the host every step
    assert [s.straggler.rank for s in slow if s.straggler] == ["1"] * 26  # steps 5 to 30: every full window
    final = slow[-1].straggler
    assert final is not None and 50.0 <= final.lag_ns / MS <= 51.0 and 70 < final.step_ns / MS < 73, final
    # identical ranks under torch.profiler (steps 5-25 profiled: one rank's host up to 20 % slower) lag up
    # to 9 ms of a 30 ms step in a window of 5: never named
    same = every_window(fixture_ranks("same"))
    assert all(s.straggler is None for s in same)
    assert max(max(r.lag_ns or 0 for r in s.ranks) for s in same) > 9 * MS


def write_lines(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def test_a_tail_leaves_a_line_being_written_for_the_next_poll(tmp_path):
    path = tmp_path / "grows.jsonl"
    tail = LineTail(path)
    assert tail.lines() == []  # not there yet
    write_lines(path, '{"a": 1}\n{"b":')
    assert tail.lines() == [b'{"a": 1}']
    write_lines(path, ' 2}\n')
    assert tail.lines() == [b'{"b": 2}'] and tail.lines() == []
    path.write_text('{"c": 3}\n')  # written anew, shorter: read from its start again
    assert tail.lines() == [b'{"c": 3}']


def test_a_tail_never_follows_a_link_or_waits_on_a_fifo(tmp_path):
    import os
    (tmp_path / "secret").write_text("x\n")
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "fifo")
    assert LineTail(tmp_path / "link").lines() == [] and LineTail(tmp_path / "fifo").lines() == []


def test_a_long_steps_file_is_read_from_its_last_steps_with_its_first_line(tmp_path):
    path = tmp_path / "rank-1-h-7.steps.jsonl"
    lines = [json.dumps({"rank": "1", "host": "h", "pid": 7, "local_rank": 1, "visible_devices": None})]
    lines += [json.dumps({"step": k, "end_unix_ns": k * MS, "end_mono_ns": k * MS}) for k in range(1, 20_001)]
    path.write_text("\n".join(lines) + "\n")
    steps = StepsFile(path, "1", "h", 7)
    steps.poll()
    assert steps.gpu == 1 and steps.marks[-1].step == 20_000 and len(steps.marks) == 64
    assert steps.tail.offset == path.stat().st_size  # read to the end, but only its last 256 KiB


def test_telemetry_rows_give_each_gpu_its_latest(tmp_path):
    from profilectl.telemetry.model import CSV_COLUMNS
    path = tmp_path / "telemetry.csv"
    write_lines(path, ",".join(CSV_COLUMNS) + "\n" + "10,1,0,nvml,300.5,,,,,,55\n10,1,1,nvml,200,,,,,,5\n")
    telemetry = TelemetryFile(path, "h")
    telemetry.poll()
    write_lines(path, "20,2,0,nvml,410,,,,,,97\n30,3,1,nvml,2")  # the last row is still being written
    telemetry.poll()
    assert [(g.gpu, g.at_unix_ns, g.busy_pct, g.power_w) for g in telemetry.latest.values()] == [
        (0, 20, 97.0, 410.0), (1, 10, 5.0, 200.0)]


def test_the_monitor_refuses_a_folder_that_is_not_a_run(tmp_path):
    from profilectl.errors import UsageError
    with pytest.raises(UsageError, match="not a profilectl run directory"):
        Monitor(tmp_path)


def test_live_jsonl_takes_whole_lines_and_stops_at_its_bound(tmp_path, monkeypatch):
    from profilectl import livewatch
    monkeypatch.setattr(livewatch, "LIVE_LOG_MAX_BYTES", 100)
    log = livewatch.LiveLog(tmp_path / "live.jsonl")
    for i in range(10):
        log.append({"i": i, "pad": "x" * 20})  # 37 bytes a line
    assert [json.loads(line)["i"] for line in (tmp_path / "live.jsonl").read_text().splitlines()] == [0, 1]
    assert log.failure == "live.jsonl stopped at its bound of 0 MiB (2 lines)" and log.fd is None


def test_live_jsonl_never_follows_a_planted_link(tmp_path):
    from profilectl import livewatch
    precious = tmp_path / "precious"
    precious.write_text("keep\n")
    (tmp_path / "live.jsonl").symlink_to(precious)
    log = livewatch.LiveLog(tmp_path / "live.jsonl")
    log.append({"i": 1})
    assert precious.read_text() == "keep\n" and log.failure is not None and log.failure.startswith("live.jsonl not written")


def test_a_line_live_jsonl_cannot_take_whole_is_cut_back(tmp_path):
    import subprocess
    import sys
    script = ("import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n"
              "from pathlib import Path; from profilectl.livewatch import LiveLog\n"
              f"log = LiveLog(Path({str(tmp_path / 'live.jsonl')!r}))\n"
              "for i in range(5): log.append({'i': i, 'pad': 'x' * 20})\n"
              "print(log.failure)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0 and done.stdout.startswith("live.jsonl stopped after 2 line(s)"), done
    assert (tmp_path / "live.jsonl").read_text().count("\n") == 2 and (tmp_path / "live.jsonl").stat().st_size == 74


def test_a_job_folder_is_followed_rank_by_rank_until_every_rank_ended(tmp_path):
    import dataclasses
    import os
    import socket

    from profilectl import runs
    from profilectl.manifest import MANIFEST_SCHEMA, Controller, Manifest
    from profilectl.telemetry.model import CSV_COLUMNS
    manifest = Manifest(schema_version=MANIFEST_SCHEMA, profilectl_version="t", service="profile", backend="timing",
                        reason="", fallbacks=(), tool=None, argv=(), phases=(), workload=(), workload_source="argument",
                        counter_set=None, gpu=None, started_at=runs.iso(runs.now_utc()),
                        controller=Controller(pid=os.getpid(), hostname=socket.gethostname()))  # alive: running
    job = tmp_path / "job"
    for rank, lag in ((0, 0.0), (1, 20.0)):
        run_dir = job / f"node1-rank{rank}"
        (run_dir / "raw/steps/run-1").mkdir(parents=True)
        manifest.write(run_dir)
        marks = ranks_with({str(rank): [lag] * 8})[0].marks
        lines = [json.dumps({"rank": str(rank), "host": "node1", "pid": 10 + rank, "local_rank": rank,
                             "visible_devices": None})]
        lines += [json.dumps({"step": m.step, "end_unix_ns": m.end_unix_ns, "end_mono_ns": m.end_mono_ns}) for m in marks]
        (run_dir / f"raw/steps/run-1/rank-{rank}-node1-{10 + rank}.steps.jsonl").write_text("\n".join(lines) + "\n")
        # each rank's profilectl samples both GPUs of the node: the newest row of each GPU is kept
        rows = [f"{100 + rank},1,{gpu},nvml,{300 + 10 * rank + gpu},,,,,,{50 + rank}" for gpu in (0, 1)]
        (run_dir / "telemetry.csv").write_text(",".join(CSV_COLUMNS) + "\n" + "\n".join(rows) + "\n")
    monitor = Monitor(job)
    state = monitor.poll()
    assert state.straggler is not None and state.straggler.rank == "1" and state.straggler.lag_ns == 20 * MS
    assert [(g.gpu, g.at_unix_ns, g.power_w) for g in state.gpus] == [(0, 101, 310.0), (1, 101, 311.0)]
    assert [(r.rank, r.gpu.gpu if r.gpu else None) for r in state.ranks] == [("0", 0), ("1", 1)]
    assert monitor.ended() is None
    dataclasses.replace(manifest, status="ok").write(job / "node1-rank0")
    assert monitor.ended() is None  # rank 1 still runs
    dataclasses.replace(manifest, status="ok").write(job / "node1-rank1")
    assert monitor.ended() == "the job's 2 rank(s) ended: ok"
