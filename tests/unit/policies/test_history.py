"""DemandHistory: bounded, time-ordered, peak over a window one period ago."""

from __future__ import annotations

import pytest

from scalectl.policies.history import DemandHistory
from scalectl.policies.spec import SeasonalForecast

DAY = 86400.0


def test_seasonal_peak_covers_exactly_the_window_one_period_ago() -> None:
    history = DemandHistory(retention=2 * DAY)
    now = 10 * DAY
    history.append(now - DAY - 1, 50)  # just before the window
    history.append(now - DAY, 3)  # window start (inclusive)
    history.append(now - DAY + 600, 7)
    history.append(now - DAY + 1200, 4)  # window end = lead 300 + horizon 900 (inclusive)
    history.append(now - DAY + 1201, 60)  # just after
    seasonal = history.seasonal(now, [DAY], lead_time=300, horizon=900)
    assert seasonal.by_period == {DAY: 7}


def test_periods_without_records_are_absent_not_zero() -> None:
    history = DemandHistory(retention=8 * DAY)
    now = 10 * DAY
    history.append(now - DAY + 60, 5)
    seasonal = history.seasonal(now, [DAY, 7 * DAY], lead_time=0, horizon=900)
    assert seasonal.by_period == {DAY: 5}


def test_unknown_demand_is_a_gap() -> None:
    history = DemandHistory(retention=DAY)
    history.append(0, None)
    assert len(history) == 0
    assert history.peak(-1, 1) is None


def test_entries_older_than_retention_are_dropped_and_storage_stays_bounded() -> None:
    history = DemandHistory(retention=3600)
    for i in range(20_000):
        history.append(float(i * 10), float(i % 7))
    assert len(history) == 361  # [t - 3600, t] at 10 s steps
    assert len(history._times) < 2 * 361 + 1100  # compacted, not growing with the run
    last = 19_999 * 10.0
    assert history.peak(0, last - 3601) is None
    assert history.peak(last - 3600, last) == 6


def test_appending_out_of_order_is_refused() -> None:
    history = DemandHistory(retention=DAY)
    history.append(100, 1)
    with pytest.raises(ValueError, match="time order"):
        history.append(99, 1)


def test_retention_for_a_forecast_covers_its_longest_period() -> None:
    history = DemandHistory.for_forecast(SeasonalForecast(periods=[DAY, 7 * DAY], horizon=900), lead_time=300)
    assert history.retention == 7 * DAY + 1200
    with pytest.raises(ValueError):
        DemandHistory(retention=0)
