"""Periodicity: a burst every 15 minutes is found from an hour of history, with its phase; Poisson noise
shows none; too little history stays out and says so."""

from __future__ import annotations

import pytest

from scalectl.policies.core.constants import MIN_LAG
from scalectl.policies.core.history import Bins
from scalectl.policies.core.periodicity import PeriodState, burst_within, observe
from tests.unit.policies.core.synth import T0, binned, counts, cron_bursts


def search(bins: Bins, now: float, horizon: float = 180.0):
    return observe(
        PeriodState(), bins, now=now, rate=20.0, horizon=horizon, grain=1.0, min_lag=MIN_LAG, label="minute periods"
    )


@pytest.mark.parametrize("seed", range(3))
def test_a_burst_every_15_minutes_is_found_from_an_hour(seed: int) -> None:
    ticks = counts(cron_bursts(), 4 * 60, seed=seed)  # an hour of 15 s ticks
    now = ticks[-1][0]
    state, forecast = search(binned(Bins(60.0, 180), ticks), now)
    assert state.period == 15
    assert forecast.name == "15m period"
    assert forecast.value == pytest.approx(20, rel=0.2)  # now + 3 m is minute 3 of a cycle: the base
    # the phase: at minute 12 of a cycle, the next burst is due in 3 minutes at about 6 × 20
    burst = burst_within(state, 60.0, T0 + 60 * 60 + 12 * 60, 240.0)
    assert burst is not None
    assert burst.due_in == pytest.approx(180.0)
    assert burst.peak == pytest.approx(120, rel=0.1)


@pytest.mark.parametrize("seed", range(20))
def test_no_period_is_found_in_poisson_noise(seed: int) -> None:
    ticks = counts(lambda t: 20.0, 4 * 180, seed=seed)  # three hours: 60 lags tried
    state, forecast = search(binned(Bins(60.0, 180), ticks), ticks[-1][0])
    assert state.period is None
    assert forecast.value is None
    assert "no recurring burst" in forecast.note


def test_too_little_history_stays_out_and_says_so() -> None:
    ticks = counts(cron_bursts(), 4 * 30)  # half an hour
    state, forecast = search(binned(Bins(60.0, 180), ticks), ticks[-1][0])
    assert forecast.value is None
    assert forecast.note == "too little history: 30 of 60 bins of 1m"
    assert burst_within(state, 60.0, ticks[-1][0], 180.0) is None


def test_state_round_trips_through_its_dict() -> None:
    ticks = counts(cron_bursts(), 4 * 60)
    state, _ = search(binned(Bins(60.0, 180), ticks), ticks[-1][0])
    assert PeriodState.from_dict(state.to_dict()) == state


def test_a_window_that_reaches_no_burst_is_not_called_one() -> None:
    from scalectl.policies.core.periodicity import PeriodState, burst_within

    profile = (10.0,) * 12 + (60.0, 60.0, 10.0)  # 15 one-minute phases: a 2-minute burst at phases 12–13
    state = PeriodState(period=15, profile=profile)
    lull = burst_within(state, 60.0, now=0.0, horizon=300.0)  # phases 0–5: all lull
    assert lull is not None and not lull.burst and lull.peak == 10.0
    due = burst_within(state, 60.0, now=600.0, horizon=180.0)  # phases 10–13: the burst at 12
    assert due is not None and due.burst and due.peak == 60.0 and due.due_in == 120.0


@pytest.mark.parametrize("seed", range(3))
def test_the_autocorrelation_of_a_series_with_every_bin_known_is_the_filtered_ones_to_the_last_bit(seed: int) -> None:
    import math
    import random

    from scalectl.policies.core.periodicity import _acf

    rng = random.Random(seed)
    residuals: list[float | None] = [rng.gauss(0.0, 5.0) for _ in range(180)]
    whole = [r for r in residuals if r is not None]
    var = math.fsum(r * r for r in whole) / len(whole)
    for lag in range(1, 61):
        assert _acf(residuals, lag, var, whole) == _acf(residuals, lag, var, None)
