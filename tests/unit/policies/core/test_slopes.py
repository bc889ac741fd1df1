"""The sorted pair slopes carried from window to window give the median the full computation gives, to the
last bit: windows that slide by one or several points, restart (a surge), repeat times, and windows of two
series that share their newest point."""

from __future__ import annotations

import random
import statistics

import pytest

from scalectl.policies.core.slopes import SlopeMemo, pair_slopes


def _full(points: tuple[tuple[float, float], ...]) -> float:
    return statistics.median(pair_slopes(points))


@pytest.mark.parametrize("seed", range(5))
def test_a_sliding_window_has_the_full_computations_median(seed: int) -> None:
    rng = random.Random(seed)
    memo = SlopeMemo()
    window: tuple[tuple[float, float], ...] = ()
    t = 1_000.0
    for _ in range(400):
        t += rng.choice([5.0, 5.0, 5.0, 0.0, 15.0])  # ticks, a repeated time, a late tick
        point = (t, float(rng.randint(0, 40)) * 2.5)  # few distinct rates: equal slopes
        if rng.random() < 0.03:
            window = (point,)  # a surge restarts the window
        else:
            window = (*(p for p in window if p[0] > t - 120.0), point)[-32:]
        if len(window) >= 3 and window[-1][0] > window[0][0]:  # some pair has a slope
            assert memo.median(window) == _full(window)


def test_two_series_with_the_same_newest_point_do_not_mix() -> None:
    memo = SlopeMemo()
    a = ((0.0, 1.0), (5.0, 2.0), (10.0, 9.0))
    b = ((0.0, 7.0), (5.0, 2.0), (10.0, 9.0))  # same two newest points, another oldest
    assert memo.median(a) == _full(a)
    assert memo.median(b) == _full(b)
    assert memo.median((*a[1:], (15.0, 3.0))) == _full((*a[1:], (15.0, 3.0)))
    assert memo.median((*b, (15.0, 3.0))) == _full((*b, (15.0, 3.0)))


def test_the_memo_keeps_a_bounded_number_of_windows() -> None:
    memo = SlopeMemo(size=4)
    for k in range(10):
        memo.median(((0.0, float(k)), (5.0, 1.0), (10.0, 2.0 + k)))
    assert len(memo._windows) == 4
