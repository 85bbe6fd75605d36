"""The exact merge of running statistics (model/tables.py KernelStats): any split of the same
durations into files, ranks or passes merges to the figures of the whole, as Python's statistics
module computes them from every value (the variance's cross-term included: two parts of different
means spread more than either)."""

import random
import statistics

import pytest

from profilectl.model.tables import KernelStats, merge_stats


def stats_of(values):
    out = KernelStats()
    for value in values:
        out.add(value)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_any_split_merges_to_the_whole(seed):
    rnd = random.Random(seed)
    values = [rnd.choice([rnd.uniform(100, 200), rnd.uniform(5_000, 9_000)]) for _ in range(200)]
    cuts = sorted(rnd.sample(range(1, len(values)), 4))
    parts = [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)])]
    merged = KernelStats()
    for part in parts:
        merged.merge(stats_of(part))
    assert merged.calls == len(values) and merged.total == pytest.approx(sum(values), rel=1e-12)
    assert merged.mean == pytest.approx(statistics.fmean(values), rel=1e-12)
    assert merged.std == pytest.approx(statistics.pstdev(values), rel=1e-9)
    assert (merged.minimum, merged.maximum) == (min(values), max(values))


def test_two_parts_of_different_means_spread_more_than_either():
    low, high = stats_of([100.0, 102.0, 98.0]), stats_of([1000.0, 1002.0, 998.0])
    both = merge_stats({"k": low}, {"k": high})["k"]
    assert both.std == pytest.approx(statistics.pstdev([100, 102, 98, 1000, 1002, 998]), rel=1e-12)
    assert both.std > 400 > max(low.std, high.std)


def test_integer_sums_and_running_sums_agree():
    values = [1_000, 1_500, 2_250, 999_999, 7]
    exact = KernelStats.from_integer_sums(len(values), sum(values), sum(v * v for v in values), min(values), max(values))
    assert exact.std == pytest.approx(statistics.pstdev(values), rel=1e-12)
    summed = KernelStats.from_sums(len(values), float(sum(values)), float(sum(v * v for v in values)), min(values),
                                   max(values))
    assert summed.std == pytest.approx(statistics.pstdev(values), rel=1e-9)
