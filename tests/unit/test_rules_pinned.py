"""Every threshold of profiling/verdicts.yaml pinned from both sides of its boundary: each pair of
cases below straddles the value the file holds today, so changing any of them (a typo, a tuning
that nobody reviewed) breaks a test. `python bench/mutate_rules.py` checks that it does: it moves
each threshold in a copy of the file and runs these tests and the corpus.

The cases are small synthetic timelines (ns): two GPU activities around one hole, host events
across it, run through the same analyses the report uses."""

from __future__ import annotations

import pytest

from profilectl.analysis import idle, live
from profilectl.analysis.live import RankMarks, StepMark
from profilectl.analysis.diagnosis import SteadyFigures, steady_finding
from profilectl.analysis.idle import IdleCause
from profilectl.analysis.steps import ProfilerCost, warmup_count
from profilectl.analysis.stragglers import RankWaits, judge
from profilectl.model.timeline import HOST_ANNOTATION, HOST_OPERATOR, HOST_RUNTIME, HostActivity, LaunchStats, rank_timeline

US, MS = 1_000, 1_000_000


def hole_cause(gap_ns: int, host: list[tuple[str, int, int, int]], before_ns: int = 0) -> str:
    """The cause idle.py gives the one hole of `gap_ns` between two kernels; host events
    (name, category, start, end) relative to the hole's start."""
    import numpy as np
    first_end = 100 * US
    timeline = rank_timeline("0", None, start=[0, first_end + gap_ns], end=[first_end, first_end + gap_ns + 100 * US],
                             stream=[0, 0], kind=[0, 0], name=[0, 1], names=["k0", "k1"], streams=["7"],
                             host_activity=HostActivity(
                                 start=np.array([first_end + s for _, _, s, _ in host], dtype=np.int64),
                                 end=np.array([first_end + e for _, _, _, e in host], dtype=np.int64),
                                 category=np.array([c for _, c, _, _ in host], dtype=np.int8),
                                 name=np.arange(len(host), dtype=np.int64), thread=np.zeros(len(host), dtype=np.int64),
                                 names=tuple(n for n, _, _, _ in host), threads=("main",)))
    found = idle.analyse_rank(timeline)
    causes = [c for c in found.whole if c.idle_ns == gap_ns]
    assert len(causes) == 1, found.whole
    return causes[0].cause


def test_gap_min_ns_is_10_us():
    loading = [("enumerate(DataLoader)#x", HOST_ANNOTATION, -10 * US, 100 * US)]
    assert hole_cause(9 * US, loading) == "launch"  # launch granularity whatever covers it
    assert hole_cause(11 * US, loading) == "input"


def test_launch_gap_max_ns_is_30_us():
    elsewhere = [("aten::add", HOST_OPERATOR, -90 * US, -80 * US)]  # the trace records host work, not here
    assert hole_cause(29 * US, elsewhere) == "launch"
    assert hole_cause(31 * US, elsewhere) == "unrecorded"


def test_cover_min_is_half_the_gap():
    def cover(share: float) -> str:
        return hole_cause(100 * US, [("enumerate(DataLoader)#x", HOST_ANNOTATION, 0, int(share * 100 * US))])
    assert cover(0.49) == "unrecorded" and cover(0.51) == "input"


def test_slow_call_min_ns_is_one_millisecond():
    # a 1.5 ms hole: either call covers more than half of it, so only the threshold tells them apart
    # (in a 2 ms hole the 0.95 ms call fell under cover_min too, and halving the threshold survived)
    def launch(duration: int) -> str:
        return hole_cause(int(1.5 * MS), [("cudaLaunchKernel", HOST_RUNTIME, 0, duration)])
    assert launch(int(0.95 * MS)) != "startup" and launch(int(1.05 * MS)) == "startup"


def test_sync_tolerance_is_20_us_and_sync_gaps_up_to_5_ms():
    def synced(ended_before: int, gap: int) -> str:
        return hole_cause(gap, [("cudaDeviceSynchronize", HOST_RUNTIME, -500 * US, -ended_before)])
    assert synced(19 * US, 1 * MS) == "synchronisation" and synced(21 * US, 1 * MS) != "synchronisation"
    assert synced(5 * US, int(4.9 * MS)) == "synchronisation" and synced(5 * US, int(5.1 * MS)) != "synchronisation"


def figures(busy: float, causes: tuple[IdleCause, ...] = (), exposed: float = 0.0, copies: float = 0.0,
            launch: LaunchStats | None = None) -> SteadyFigures:
    span = 100 * MS
    return SteadyFigures(scope="test", span_ns=span, idle_ns=int(span * (1 - busy / 100)), busy_percent=busy,
                         exposed_ns=int(exposed * span), exposed_share=exposed, copy_ns=int(copies * span * busy / 100),
                         copy_share=copies, causes=causes, launch=launch)


UNRECORDED = (IdleCause(cause="unrecorded", title="unrecorded host work", idle_ns=10 * MS, gaps=3, share=1.0),)


def verdict(f: SteadyFigures) -> str:
    return steady_finding(f).verdict


def test_busy_ok_percent_is_80():
    assert verdict(figures(79, UNRECORDED)) == "host-bound" and verdict(figures(81, UNRECORDED)) == "gpu-bound"


def test_dominant_share_is_35_percent():
    def spread(top: float) -> str:
        causes = (IdleCause("input", "data loading", int(top * 10 * MS), 1, top),
                  IdleCause("unrecorded", "unrecorded host work", int((1 - top) * 10 * MS), 1, 1 - top))
        return steady_finding(figures(50, causes)).sentence
    assert "no single cause" in spread(0.34) and spread(0.36).startswith("input-bound")


def test_exposed_communication_share_is_30_percent():
    assert verdict(figures(95, UNRECORDED, exposed=0.29)) == "gpu-bound"
    assert verdict(figures(95, UNRECORDED, exposed=0.31)) == "communication-bound"


def test_copy_shares_are_half_the_busy_time_with_the_gpu_busy_half_the_time():
    assert verdict(figures(90, UNRECORDED, copies=0.49)) == "gpu-bound"
    assert verdict(figures(90, UNRECORDED, copies=0.51)) == "data-movement-bound"
    assert verdict(figures(49, UNRECORDED, copies=0.9)) == "host-bound"
    assert verdict(figures(51, UNRECORDED, copies=0.9)) == "data-movement-bound"


def test_launch_evidence_is_30_percent_short_kernels_or_a_queue_under_1_5():
    launch_gaps = (IdleCause("launch", "launch overhead", 10 * MS, 100, 0.8),
                   IdleCause("unrecorded", "unrecorded host work", 2 * MS, 2, 0.2))

    def with_launch(short: float, depth: float) -> str:
        stats = LaunchStats(short_kernel_percent=short, short_kernels=1, short_kernel_basis="launch call",
                            launch_call_ns=1, launch_delay_mean_ns=1.0, queue_depth_mean=depth, queue_depth_max=3)
        return steady_finding(figures(40, launch_gaps, launch=stats)).verdict
    assert with_launch(29, 2.0) != "launch-bound" and with_launch(31, 2.0) == "launch-bound"
    assert with_launch(0, 1.55) != "launch-bound" and with_launch(0, 1.45) == "launch-bound"


def waits(rank: str, per_step: list[int]) -> RankWaits:
    return RankWaits(rank=rank, host="h", basis="NCCL/RCCL kernels",
                     steps=tuple((n, n * 100 * MS, (n + 1) * 100 * MS, w) for n, w in enumerate(per_step)))


def test_straggler_min_ns_is_2_ms_per_step():
    def lead(ms: float) -> bool:
        return judge([waits("0", [int(ms * MS)] * 5), waits("1", [0] * 5)]).straggler is not None
    assert not lead(1.9) and lead(2.1)


def test_straggler_consistency_is_60_percent_of_the_steps():
    def led_in(steps_led: int) -> bool:
        per_step = [10 * MS] * steps_led + [0] * (10 - steps_led)
        return judge([waits("0", per_step), waits("1", [0] * 10)]).straggler is not None
    assert not led_in(5) and led_in(7)  # 50 % and 70 % of the steps (the median lead then passes 2 ms too)


def test_a_straggler_needs_three_observations():
    assert judge([waits("0", [10 * MS] * 2), waits("1", [0] * 2)]).straggler is None  # 2 steps x 1 other rank
    assert judge([waits("0", [10 * MS] * 3), waits("1", [0] * 3)]).straggler is not None


def test_the_profiler_margin_is_1_5_and_its_overhead_finding_25_percent():
    from profilectl.analysis.diagnosis import _profiler_finding, _straggler_finding
    found = judge([waits("0", [15 * MS] * 5), waits("1", [0] * 5)])

    def cost(added_ms: float, base_ms: float = 20) -> ProfilerCost:
        return ProfilerCost(profiled_ns=int((base_ms + added_ms) * MS), unprofiled_ns=int(base_ms * MS),
                            profiled_steps=10, unprofiled_steps=10)
    assert _straggler_finding(found, cost(10.5)) is None  # 15 ms lead within 1.5 x 10.5 ms
    assert _straggler_finding(found, cost(9.5)) is not None  # 1.5 x 9.5 = 14.25 ms < 15 ms
    assert _profiler_finding(cost(4.9)) is None and _profiler_finding(cost(5.1)) is not None  # 24.5 % / 25.5 %


def test_warmup_steps_is_two_and_phase_dominant_share_is_half():
    assert [warmup_count(n, idle.rules()["warmup_steps"]) for n in (2, 3, 8, 12, 40)] == [0, 1, 2, 2, 2]
    from profilectl.analysis.diagnosis import _phase_findings
    from profilectl.analysis.idle import RankIdle

    def compile_share(share: float) -> bool:
        whole = (IdleCause("compile", "compile", int(share * 100), 1, share),
                 IdleCause("unrecorded", "unrecorded host work", int((1 - share) * 100), 1, 1 - share))
        rank = RankIdle(rank="0", host=None, span_ns=100, idle_ns=100, scope="x", steady_span_ns=0, steady_idle_ns=0,
                        steady=(), whole=whole, phases=())
        return _phase_findings([rank], whole)[0] is not None
    assert not compile_share(0.49) and compile_share(0.51)


def live_marks(lags_ms: list[float], step_ms: float) -> list[RankMarks]:
    """Two ranks stepping every `step_ms`; rank 1's k-th step ends lags_ms[k] after rank 0's."""
    def marks(lags: list[float]) -> tuple[StepMark, ...]:
        ends = [int((k + 1) * step_ms * MS + lag * MS) for k, lag in enumerate(lags)]
        return tuple(StepMark(step=k + 1, end_unix_ns=end, end_mono_ns=int((k + 1) * step_ms * MS))
                     for k, end in enumerate(ends))
    return [RankMarks("0", "h", 1, marks([0.0] * len(lags_ms))), RankMarks("1", "h", 2, marks(lags_ms))]


def live_named(lags_ms: list[float], step_ms: float) -> bool:
    found = live.assess(live_marks(lags_ms, step_ms), (), 0).straggler
    assert found is None or found.rank == "1"
    return found is not None


def test_live_straggler_share_is_40_percent_of_its_step():
    assert not live_named([39.0] * 8, 100) and live_named([41.0] * 8, 100)  # floor 2 ms far below


def test_live_straggler_min_ns_is_2_ms():
    assert not live_named([1.9] * 8, 1) and live_named([2.1] * 8, 1)  # 40 % of a 1 ms step far below


def test_live_window_is_the_last_5_common_steps():
    # lagging in three steps, then not in the last two: a median of 5 still names it; of 4 or 6, no
    assert live_named([0, 0, 0, 0, 50, 50, 50, 0, 0], 100)
    assert not live_named([0, 0, 0, 0, 50, 50, 0, 0, 0], 100)  # two of five
    # a window that fills is judged from 3 steps past the 2 warm-up steps on
    assert not live_named([50] * 4, 100) and live_named([50] * 5, 100)


@pytest.mark.parametrize("name", sorted(idle.rules().thresholds))
def test_every_threshold_is_pinned_here(name):
    """A threshold added to verdicts.yaml without a test here fails this one (a *_reason is prose)."""
    import inspect
    import sys
    source = inspect.getsource(sys.modules[__name__])
    if name.endswith("_reason"):
        return
    pinned = {"gap_min_ns", "launch_gap_max_ns", "cover_min", "slow_call_min_ns", "sync_tolerance_ns", "sync_gap_max_ns",
              "busy_ok_percent", "dominant_share", "phase_dominant_share", "launch_short_kernel_percent",
              "launch_queue_depth_max", "exposed_communication_share", "copy_dominant_share", "copy_busy_min_percent",
              "straggler_min_ns", "straggler_consistency", "straggler_min_comparisons", "straggler_profiler_margin",
              "profiler_overhead_percent", "warmup_steps", "live_window_steps", "live_straggler_min_ns",
              "live_straggler_share"}
    assert name in pinned and "def test_" in source, f"{name}: no test pins it"


def test_a_ranks_copy_share_is_of_its_busy_time_not_of_its_span():
    """figures_of: 30 ms of copies in a 100 ms steady span whose GPU is busy 50 ms are 60 % of the
    busy time (data-movement-bound), not 30 % of the span."""
    from profilectl.analysis.diagnosis import figures_of
    from profilectl.model.reductions import RankIdle
    rank = RankIdle(rank="0", host=None, span_ns=100 * MS, idle_ns=50 * MS, scope="steps 2-8 (steady state)",
                    steady_span_ns=100 * MS, steady_idle_ns=50 * MS, steady=UNRECORDED, whole=UNRECORDED, phases=(),
                    steady_copy_ns=30 * MS)
    found = figures_of(rank)
    assert found.copy_share == pytest.approx(0.6) and found.busy_percent == pytest.approx(50.0)
    assert steady_finding(found).verdict == "data-movement-bound"


def test_rccl_and_nccl_kernels_are_collectives():
    from profilectl.model.collectives import collective_names, is_collective
    assert is_collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert is_collective("rcclGenericKernel<1, false>")  # a name with RCCL's prefix and no "nccl"
    assert not is_collective("void at::native::vectorized_elementwise_kernel<4>")
    assert collective_names(["rccl_AllGather", "gemm"]).tolist() == [True, False]
