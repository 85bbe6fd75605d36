"""Stragglers on real NCCL (issue 32): two DDP runs on two H200s (bench/nvidia_stragglers.sh), one
with identical ranks and one with rank 1 sleeping 50 ms on the host at every step. Known answers:
the sleeping rank is the straggler and what it costs the others is what they wait; with identical
ranks nobody is, and the profiler's own cost is said (it made rank 1's host work slower than rank
0's: 15.6 ms of lead per step against 11.1 ms that the profiler adds to every step)."""

import json
import statistics

import pytest

from profilectl.report.load import load
from support import FIXTURES

DDP = FIXTURES / "nvidia-h200-ddp"


@pytest.fixture(scope="module")
def slow():
    return load(DDP / "slow")


@pytest.fixture(scope="module")
def same():
    return load(DDP / "same")


def test_the_sleeping_rank_is_the_straggler_and_costs_what_the_others_wait(slow):
    diagnosis = slow.diagnosis
    top = diagnosis.findings[0]
    assert top.verdict == "straggler" and top.sentence.startswith("rank 1 (vm) is the straggler")
    found = diagnosis.stragglers.straggler
    assert found.rank == "1" and found.steps == 5 and found.steps_led == 5
    steps = [s for s in diagnosis.stragglers.steps]
    waits = {r: statistics.median(s.collective_ns for s in steps if s.rank == r) for r in ("0", "1")}
    own = {r: statistics.median(s.own_ns for s in steps if s.rank == r) for r in ("0", "1")}
    # what it costs the others is what they lose: the lead is rank 0's wait less rank 1's own
    assert abs(found.lead_ns - (waits["0"] - waits["1"])) < 0.05 * waits["0"]
    # its extra work per step holds the 50 ms sleep
    assert 50e6 <= own["1"] - own["0"] <= 65e6
    # the rank that waits is waiting, not gpu-bound: its NCCL kernels spin while they wait
    verdicts = {f.scope.split(",")[0]: f.verdict for f in diagnosis.findings if f.scope.startswith("rank ")}
    assert verdicts["rank 0"] == "communication-bound"
    assert verdicts["rank 1"] == "host-bound"  # its sleep: host work the trace does not record
    assert not any(f.verdict == "profiler-overhead" for f in diagnosis.findings)  # +7 %, under the rule's 25 %


def test_identical_ranks_name_no_straggler_and_say_what_the_profiler_adds(same):
    diagnosis = same.diagnosis
    assert not any(f.verdict == "straggler" for f in diagnosis.findings)
    assert diagnosis.stragglers.straggler is None
    assert "what the profiler adds per step" in diagnosis.stragglers.why_none
    overhead = next(f for f in diagnosis.findings if f.verdict == "profiler-overhead")
    # the figures, computed here from the hook's own status files: steps 4-29, inside [5, 25) and
    # outside it, the window's edges (4, 5, 24, 25) and the warm-up left out
    inside, outside = [], []
    for path in sorted((DDP / "same").glob("*.status.json")):
        ends = json.loads(path.read_text())["step_ends_ns"]
        for step in range(2, len(ends)):
            if step in (4, 5, 24, 25):
                continue
            (inside if 5 <= step < 25 else outside).append(ends[step] - ends[step - 1])
    added = statistics.median(inside) - statistics.median(outside)
    assert f"adds {added / 1e6:.2f} ms per step" in overhead.sentence, overhead.sentence
    assert "rank 1 is waited for" in diagnosis.stragglers.why_none


def test_the_job_verdicts_are_the_ranks_own_averaged(slow):
    from profilectl.analysis.diagnosis import figures_of
    ranks = slow.diagnosis.ranks
    mean = sum(figures_of(r).busy_percent for r in ranks) / len(ranks)
    job = next(f for f in slow.diagnosis.findings if "mean of 2 ranks" in f.scope)
    assert f"GPU busy {mean:.0f} % on average" in job.evidence[0]


def test_clock_offsets_between_hosts_change_no_job_figure(tmp_path, slow):
    """Half the job's ranks on another host whose clock is 1.2 s ahead (the issue: "shift half the
    ranks' clocks by 1.2 s and busy drops to 2 %"): every job figure is the ranks' own, each on its
    own clock, so the busy mean, the verdicts and the straggler stay; only the union across hosts,
    shown under its own name, moves."""
    import gzip
    import shutil
    for path in (DDP / "slow").iterdir():
        if "rank1" in path.name and path.name.endswith(".gz"):
            doc = json.loads(gzip.decompress(path.read_bytes()))
            for event in doc["traceEvents"]:
                if isinstance(event.get("ts"), (int, float)):
                    event["ts"] += 1_200_000  # µs
            (tmp_path / path.name.replace("vm-", "other-")).write_bytes(gzip.compress(json.dumps(doc).encode()))
        else:
            shutil.copy(path, tmp_path / path.name)
    shifted = load(tmp_path)
    assert shifted.timeline.ranks_busy == slow.timeline.ranks_busy
    assert [f.sentence for f in shifted.diagnosis.findings if not f.scope.startswith("rank ")][:2] == \
        [f.sentence.replace("(vm)", "(other)") if "rank 1" in f.sentence else f.sentence
         for f in slow.diagnosis.findings if not f.scope.startswith("rank ")][:2]
    assert shifted.diagnosis.stragglers.straggler.rank == "1"
    assert shifted.timeline.merged.rank == "any GPU" and shifted.timeline.merged.busy_percent < \
        slow.timeline.merged.busy_percent
