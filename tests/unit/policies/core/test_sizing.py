"""Sizing: a known forecast error gives a known headroom; an unmeasured one the cold headroom; a forecast
with too little history stays out and the reason says so."""

from __future__ import annotations

from scalectl.policies.core.capacity import Capacity
from scalectl.policies.core.forecast import ErrorTrack, Forecast
from scalectl.policies.core.sizing import size

CAP = Capacity(6.4, 1.28, "learned")


def test_a_known_error_quantile_is_the_headroom() -> None:
    need = size([Forecast("surge", 40.0, 3.2)], CAP, unit="req/s", horizon=180.0)
    assert need.count == 7  # ceil((40 + 3.2) / 6.4) = ceil(6.75); without the error it would be ceil(6.25) = 7 too
    need = size([Forecast("surge", 40.0, 12.0)], CAP, unit="req/s", horizon=180.0)
    assert need.count == 9  # ceil(52 / 6.4) = ceil(8.1)
    assert need.text.startswith("need 9 = ceil((40 + 12) req/s at +3m (surge; err p90 12) ÷ 6.4 req/s per instance")


def test_the_error_quantile_comes_from_measured_errors() -> None:
    track = ErrorTrack()
    for k, err in enumerate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]):
        track = track.file(k * 30.0, k * 30.0 + 1, 100.0).settle(k * 30.0 + 1, 100.0 + err)
    assert track.quantile() == 9.0  # nearest-rank p90 of 1..10
    assert ErrorTrack(errors=(-5.0,) * 10).quantile() == 0.0  # over-forecasts are no shortfall


def test_an_unmeasured_error_takes_the_cold_headroom() -> None:
    need = size([Forecast("trend", 40.0, None)], CAP, unit="req/s", horizon=180.0)
    assert need.count == 8  # ceil(40 × 1.25 / 6.4) = ceil(7.8)
    assert "err unmeasured: +25%" in need.text


def test_the_most_demanding_usable_forecast_wins_and_the_others_say_why_they_are_out() -> None:
    forecasts = [
        Forecast("trend", 20.0, 1.0),
        Forecast("15m period", 60.0, 4.0),
        Forecast("daily", None, None, "too little history: 3 h of 24 h"),
    ]
    need = size(forecasts, CAP, unit="req/s", horizon=180.0)
    assert need.count == 10  # ceil(64 / 6.4)
    assert "(15m period; err p90 4)" in need.text
    assert need.text.endswith("[out: daily: too little history: 3 h of 24 h]")


def test_a_growing_backlog_is_a_separate_term() -> None:
    need = size([Forecast("trend", 40.0, 0.0)], CAP, unit="req/s", horizon=180.0, backlog=12.8)
    assert need.count == 9  # ceil((40 + 12.8) / 6.4) = ceil(8.25)
    assert "+ 12.8 backlog" in need.text
