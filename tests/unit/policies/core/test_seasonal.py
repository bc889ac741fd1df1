"""Seasonality: two days of a business day forecast the third's morning ramp a boot ahead; a tier younger
than a day stays out."""

from __future__ import annotations

import pytest

from scalectl.policies.core.history import Bins
from scalectl.policies.core.seasonal import SeasonalState, observe
from tests.unit.policies.core.synth import T0, binned, counts, daily


def slots_until(end: float) -> Bins:
    ticks = counts(daily, int((end - T0) // 15.0))
    return binned(Bins(900.0, 8 * 96), ticks)


def test_yesterday_at_the_horizon_forecasts_the_morning_ramp() -> None:
    now = T0 + 2 * 86400 + 9 * 3600  # day three, 09:00 UTC
    _, forecasts = observe(SeasonalState(), slots_until(now), now=now, rate=daily(now), horizon=1800.0)
    by_name = {f.name: f for f in forecasts}
    assert by_name["daily"].value == pytest.approx(daily(now + 1800.0), rel=0.1)
    ahead = daily(now + 1800.0)
    assert by_name["daily"].value > (daily(now) + ahead) / 2  # ahead of the ramp: nearer then than now
    assert by_name["weekly"].value is None
    assert by_name["weekly"].note == "too little history: 57 h of 168 h"


def test_a_tier_younger_than_a_day_stays_out() -> None:
    now = T0 + 20 * 3600
    _, forecasts = observe(SeasonalState(), slots_until(now), now=now, rate=daily(now), horizon=300.0)
    assert all(f.value is None for f in forecasts)
    assert forecasts[0].note == "too little history: 20 h of 24 h"
