"""Predictive: max(schedule, forecast, reactive) with headroom; reactive rules take over after a window."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from scalectl.policies.types import Bounds, SeasonalHistory
from tests.unit.policies.helpers import Runner, spec

NY = ZoneInfo("America/New_York")
DAY = 86400.0
WEEK = 7 * DAY


def ny(*parts: int) -> float:
    return datetime(*parts, tzinfo=NY).timestamp()  # type: ignore[misc, arg-type]


SCHEDULED = spec(
    kind="predictive",
    headroom=0.30,
    lead_time="5m",
    schedule=[{"cron": "0 8 * * mon-fri", "until": "18:00", "instances": 6, "timezone": "America/New_York"}],
    reactive={
        "mode": "thresholds",
        "queue_per_instance": 10,
        "scale_out_after": "60s",
        "scale_in_after": "5m",
        "cooldown": "5m",
        "scale_in_step": 100,
    },
)


def runner(policy: object = SCHEDULED, current: int = 1) -> Runner:
    return Runner(policy, bounds=Bounds(min=1, max=30), current=current, start=0.0)  # type: ignore[arg-type]


def test_schedule_asks_instances_plus_headroom_from_lead_time_before_start() -> None:
    run = runner()
    assert run.tick(ny(2026, 3, 2, 7, 54, 59), queue_depth=0).desired == 1
    decision = run.tick(ny(2026, 3, 2, 7, 55, 1), queue_depth=0)
    assert decision.desired == 8  # ceil(6 × 1.3)
    assert "6 × 1.3 = 8" in decision.reason
    assert "starts in 4m59s" in decision.reason


def test_headroom_arithmetic_does_not_round_up_float_noise() -> None:
    policy = spec(
        kind="predictive",
        reactive={"mode": "thresholds"},
        headroom=0.3,
        lead_time=0,
        schedule=[{"cron": "0 0 * * *", "until": "23:59", "instances": 10}],
    )
    assert runner(policy).tick(ny(2026, 3, 4, 12, 0), queue_depth=0).desired == 13  # not 14


def test_reactive_rules_take_over_when_the_window_ends() -> None:
    run = runner(current=1)
    step = 60.0
    t = ny(2026, 3, 2, 7, 0)
    end = ny(2026, 3, 2, 18, 0)
    while t < end:
        run.tick(t, queue_depth=5)
        t += step
    assert run.current == 8
    # After the window: low queue, so the reactive scale-in clock starts at 18:00.
    run.tick(end, queue_depth=5)
    assert run.tick(end + 299, queue_depth=5).desired == 8
    after = run.tick(end + 301, queue_depth=5)
    assert after.desired == 1
    assert "no schedule window or forecast now" in after.reason


def test_reactive_demand_above_the_plan_wins() -> None:
    run = runner(current=8)
    t = ny(2026, 3, 2, 12, 0)
    run.tick(t, queue_depth=200)
    decision = run.tick(t + 60, queue_depth=200)
    assert decision.desired == 20
    assert decision.demand == 20


def test_missing_queue_during_and_after_window_never_reduces() -> None:
    run = runner(current=8)
    end = ny(2026, 3, 2, 18, 0)
    for offset in range(0, 3600, 60):
        assert run.tick(end + offset, queue_depth=None).desired == 8
    assert "queue_depth unknown" in run.decisions[-1].reason


FORECAST = spec(
    kind="predictive",
    reactive={"mode": "thresholds"},
    headroom=0.30,
    lead_time="5m",
    forecast={"mode": "seasonal", "periods": ["1d", "7d"], "horizon": "15m"},
)


def test_forecast_asks_peak_one_period_ago_plus_headroom() -> None:
    run = runner(FORECAST)
    decision = run.tick(ny(2026, 3, 4, 12, 0), queue_depth=0, history=SeasonalHistory({DAY: 10.0}))
    assert decision.desired == 13
    assert "forecast: peak 10 1d ago × 1.3 = 13" in decision.reason


def test_forecast_takes_the_highest_period() -> None:
    history = SeasonalHistory({DAY: 4.0, WEEK: 9.0})
    assert runner(FORECAST).tick(ny(2026, 3, 4, 12, 0), queue_depth=0, history=history).desired == 12


def test_forecast_without_history_leaves_it_to_the_reactive_rules() -> None:
    decision = runner(FORECAST).tick(ny(2026, 3, 4, 12, 0), queue_depth=0)
    assert decision.desired == 1
    assert "no demand recorded one period ago yet" in decision.reason


def test_result_is_the_max_of_schedule_and_forecast() -> None:
    both = spec(
        kind="predictive",
        reactive={"mode": "thresholds"},
        headroom=0,
        lead_time=0,
        schedule=[{"cron": "0 9 * * *", "until": "17:00", "instances": 5, "timezone": "America/New_York"}],
        forecast={"periods": ["1d"], "horizon": "15m"},
    )
    noon = ny(2026, 3, 4, 12, 0)
    assert runner(both).tick(noon, queue_depth=0, history=SeasonalHistory({DAY: 7.0})).desired == 7
    assert runner(both).tick(noon, queue_depth=0, history=SeasonalHistory({DAY: 2.0})).desired == 5


def test_overlapping_windows_take_the_larger() -> None:
    policy = spec(
        kind="predictive",
        reactive={"mode": "thresholds"},
        headroom=0,
        lead_time=0,
        schedule=[
            {"cron": "0 8 * * *", "until": "18:00", "instances": 4},
            {"cron": "0 12 * * *", "until": "14:00", "instances": 9},
        ],
    )
    assert runner(policy).tick(datetime(2026, 3, 4, 13, 0, tzinfo=ZoneInfo("UTC")).timestamp()).desired == 9
    assert runner(policy).tick(datetime(2026, 3, 4, 15, 0, tzinfo=ZoneInfo("UTC")).timestamp()).desired == 4


def test_a_window_opened_ahead_stays_open_when_a_faster_boot_is_measured_meanwhile() -> None:
    """The flap 8 → 4 → 2 → 8: a window opened 10 minutes ahead (the lead then) must not close when boots
    measured in between say 3 minutes, or it retires what it started and opens again."""
    from scalectl.policies.predictive import decide
    from scalectl.policies.types import PolicyInput, PolicyState, Signals

    window = spec(
        kind="predictive",
        headroom=0,
        schedule=[{"cron": "0 9 * * *", "until": "17:00", "instances": 8, "timezone": "America/New_York"}],
    )
    start = ny(2026, 3, 4, 9, 0)
    quiet = Signals(requests_running=0, requests_waiting=0, arrivals=0, request_rate=0, finish_rate=0)
    opened = decide(window, PolicyInput(start - 600, quiet, 2, PolicyState(), boot_time=600.0))
    assert opened.desired == 8 and "starts in 10m" in opened.reason
    later = decide(window, PolicyInput(start - 420, quiet, 8, opened.state, boot_time=180.0))
    assert later.desired == 8 and "starts in 7m" in later.reason
    fresh = decide(window, PolicyInput(start - 420, quiet, 8, PolicyState(), boot_time=180.0))
    assert fresh.reason.startswith("no schedule window now")  # without the memory it would have closed
