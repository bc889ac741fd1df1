"""Demand: the surge detector follows a step within two ticks; a ramp is carried to the horizon; a flat
Poisson load is neither."""

from __future__ import annotations

import pytest

from scalectl.policies.core.demand import DemandState, observe
from tests.unit.policies.core.synth import T0, TICK, counts

HORIZON = 180.0


def run(ticks: list[tuple[float, float]], state: DemandState | None = None):
    state = state or DemandState()
    out = []
    for t, n in ticks:
        state, forecast = observe(state, now=t, tick_s=TICK, count=n, grain=1.0, horizon=HORIZON)
        out.append(forecast)
    return state, out


def test_a_step_is_followed_within_two_ticks_at_its_level() -> None:
    # 100 req/s for 10 minutes, then 400 (Knative's panic: a short window at twice the baseline)
    state, _ = run(counts(lambda t: 100.0, 40))
    start = T0 + 40 * TICK
    _, after = run(counts(lambda t: 400.0, 2, seed=1, start=start), state)
    assert after[0].name == "surge"
    assert after[0].value == pytest.approx(400, rel=0.05)  # the first tick of the step
    assert after[1].value == pytest.approx(400, rel=0.05)


def test_a_step_that_lands_mid_tick_is_whole_by_the_second_tick() -> None:
    state, _ = run(counts(lambda t: 100.0, 40))
    start = T0 + 40 * TICK
    # the step comes 7 s into the tick: 7 s at 100 req/s and 8 s at 400, then a whole tick at 400
    _, after = run([(start + TICK, 7 * 100.0 + 8 * 400.0), (start + 2 * TICK, 15 * 400.0)], state)
    assert after[0].name == "surge"
    assert after[0].value == pytest.approx(260, rel=0.01)  # what the tick saw, at once
    assert after[1].value == pytest.approx(400, rel=0.01)  # the step whole at the second tick


def test_a_ramp_is_extrapolated_to_where_it_will_be_a_boot_later() -> None:
    # 100 → +1 req/s each second: at +180 s it will be 180 higher than now
    ramp = counts(lambda t: 100.0 + max(0.0, t - T0 - 300), 40)
    _, forecasts = run(ramp)
    now = ramp[-1][0] - TICK  # the last tick's rate is its start's (synth samples the rate at a tick's start)
    expected = 100 + (now - T0 - 300) + HORIZON
    assert forecasts[-1].value == pytest.approx(expected, rel=0.08)
    assert "rising" in forecasts[-1].note


@pytest.mark.parametrize("seed", range(5))
def test_flat_poisson_is_neither_a_surge_nor_a_rise(seed: int) -> None:
    _, forecasts = run(counts(lambda t: 20.0, 80, seed=seed))
    assert all(f.name == "trend" for f in forecasts[1:])
    assert all(f.note == "level" for f in forecasts[10:])
    assert forecasts[-1].value == pytest.approx(20, rel=0.25)


def test_the_forecast_error_is_measured_once_forecasts_come_due() -> None:
    state, forecasts = run(counts(lambda t: 50.0, 8))
    assert forecasts[-1].err is None  # nothing due yet: a 180 s horizon is 12 ticks
    state, forecasts = run(counts(lambda t: 50.0, 80, start=T0 + 8 * TICK), state)
    assert forecasts[-1].err is not None
    assert forecasts[-1].err < 10  # about 2σ of a 15 s Poisson count at 50 req/s (1.8 req/s σ)


def test_state_round_trips_through_its_dict() -> None:
    state, _ = run(counts(lambda t: 50.0, 30))
    assert DemandState.from_dict(state.to_dict()) == state


def test_the_peak_is_the_last_minutes_highest_tick_less_its_noise_and_then_expires() -> None:
    state, _ = run(counts(lambda t: 100.0, 40))
    assert state.peak < 100.0  # a flat load's ticks, each less two sigmas of its Poisson noise
    start = T0 + 40 * TICK
    burst, _ = run([(start + TICK, 600.0 * TICK)], state)  # one tick at 600 req/s: the baseline lags it
    assert burst.stable is not None and burst.stable < 300.0
    assert burst.peak == pytest.approx(600.0 - 2 * (600.0 * TICK) ** 0.5 / TICK)
    later, _ = run(counts(lambda t: 100.0, 8, start=start + TICK), burst)  # two minutes on: out of the window
    assert later.peak < 150.0
