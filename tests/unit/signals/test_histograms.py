"""Histogram arithmetic: Prometheus' histogram_quantile, counter resets, merging."""

from __future__ import annotations

import math

import pytest

from scalectl.sources.histograms import counter_increase, histogram_increase, histogram_quantile, merge
from scalectl.sources.vllm_snapshot import Histogram

INF = math.inf


def h(pairs: list[tuple[float, float]], total: float = 0.0) -> Histogram:
    return Histogram(tuple(b for b, _ in pairs), tuple(c for _, c in pairs), total)


def test_quantile_interpolates_inside_the_bucket_like_prometheus() -> None:
    hist = h([(0.1, 10), (0.5, 30), (1.0, 40), (INF, 40)])
    assert histogram_quantile(0.25, hist) == pytest.approx(0.1)  # rank 10: the top of the first bucket
    assert histogram_quantile(0.5, hist) == pytest.approx(0.1 + 0.4 * (20 - 10) / 20)
    assert histogram_quantile(0.95, hist) == pytest.approx(0.5 + 0.5 * (38 - 30) / 10)
    assert histogram_quantile(0.0, hist) == pytest.approx(0.0)


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound() -> None:
    assert histogram_quantile(0.99, h([(0.1, 1), (0.5, 2), (INF, 10)])) == 0.5


def test_quantile_without_observations_is_unknown_not_zero() -> None:
    assert histogram_quantile(0.95, h([(0.1, 0), (INF, 0)])) is None
    assert histogram_quantile(0.95, None) is None


def test_counter_increase_treats_a_drop_as_a_restart() -> None:
    assert counter_increase([5, 10, 3, 7]) == 5 + 3 + 4
    assert counter_increase([5, 5]) == 0
    assert counter_increase([9]) == 0


def test_histogram_increase_across_a_restart_is_never_negative() -> None:
    before = h([(0.1, 50), (INF, 80)], 20.0)
    after_restart = h([(0.1, 2), (INF, 3)], 0.6)
    later = h([(0.1, 4), (INF, 7)], 1.6)
    inc = histogram_increase([before, after_restart, later])
    assert inc is not None
    assert inc.cumulative == (4, 7)  # 2 + 2 and 3 + 4: the restart's own counts are the first delta
    assert inc.sum == pytest.approx(1.6)


def test_histogram_increase_when_only_one_bucket_dropped_is_a_reset() -> None:
    inc = histogram_increase([h([(0.1, 5), (INF, 9)]), h([(0.1, 4), (INF, 10)])])
    assert inc is not None and inc.cumulative == (4, 10)


def test_histogram_increase_after_a_layout_change() -> None:
    old = h([(0.1, 5), (10.0, 9), (INF, 9)])
    new = h([(0.1, 1), (10.0, 2), (20.0, 2), (INF, 2)])
    later = h([(0.1, 2), (10.0, 4), (20.0, 5), (INF, 5)])
    inc = histogram_increase([old, new, later])
    assert inc is not None and inc.bounds == new.bounds and inc.cumulative == (2, 4, 5, 5)


def test_single_reading_has_no_increase() -> None:
    assert histogram_increase([h([(INF, 3)])]) is None


def test_merge_sums_buckets_on_the_bounds_every_server_has() -> None:
    a = h([(0.1, 1), (10.0, 3), (INF, 3)], 1.0)
    b = h([(0.1, 2), (10.0, 4), (20.0, 6), (INF, 7)], 2.0)
    merged = merge([a, b])
    assert merged is not None
    assert merged.bounds == (0.1, 10.0, INF)
    assert merged.cumulative == (3, 7, 10)
    assert merged.sum == 3.0
    assert merge([]) is None
