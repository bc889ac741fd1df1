"""Bins: ``last_complete`` names the last bin ``series`` would return, without building the series (the
periodicity search runs only when it moves)."""

from __future__ import annotations

import pytest

from scalectl.policies.core.history import Bins


@pytest.mark.parametrize(
    ("spans", "now"),
    [
        ((), 600.0),  # nothing recorded: no complete bin
        (((0.0, 15.0),), 15.0),  # one bin under way
        (((0.0, 15.0), (15.0, 75.0)), 75.0),  # the first bin complete, the second under way
        (((0.0, 600.0),), 600.0),  # ten complete bins, the eleventh just begun
        (((600.0, 660.0),), 300.0),  # bins recorded after ``now`` (a clock set back): none before it
    ],
)
def test_last_complete_is_the_last_bin_of_the_series(spans: tuple[tuple[float, float], ...], now: float) -> None:
    bins = Bins(60.0, 180)
    for t0, t1 in spans:
        bins = bins.add(t0, t1, 10.0)
    first, series = bins.series(now)
    assert bins.last_complete(now) == first + len(series) - 1


def test_add_keeps_the_newest_bins_in_order_and_drops_the_rest() -> None:
    bins = Bins(60.0, 5)
    for k in range(12):  # 15 s ticks over three minutes...
        bins = bins.add(15.0 * k, 15.0 * (k + 1), 1.0)
    assert bins.counts == {0: (4.0, 60.0), 1: (4.0, 60.0), 2: (4.0, 60.0)}  # nothing to drop yet
    bins = bins.add(180.0, 600.0, 7.0)  # ...then one reading over seven more: bins 0 to 5 go
    assert list(bins.counts.items()) == [(6, (1.0, 60.0)), (7, (1.0, 60.0)), (8, (1.0, 60.0)), (9, (1.0, 60.0))]
