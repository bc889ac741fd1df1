"""Predictive: max(schedule, decision core) with headroom; the core takes over after a window."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from scalectl.policies.types import Bounds
from tests.unit.policies.helpers import Runner, spec

NY = ZoneInfo("America/New_York")


def ny(*parts: int) -> float:
    return datetime(*parts, tzinfo=NY).timestamp()  # type: ignore[misc, arg-type]


SCHEDULED = spec(
    kind="predictive",
    headroom=0.30,
    lead_time="5m",
    schedule=[{"cron": "0 8 * * mon-fri", "until": "18:00", "instances": 6, "timezone": "America/New_York"}],
    reactive={"capacity": 50},  # requests in flight one instance serves (a unit test has no engine model)
)
# An idle vLLM tier: every signal read, nothing running, waiting or arriving.
QUIET = {"requests_running": 0, "requests_waiting": 0, "arrivals": 0, "request_rate": 0, "finish_rate": 0}


def runner(policy: object = SCHEDULED, current: int = 1) -> Runner:
    return Runner(policy, bounds=Bounds(min=1, max=30), current=current, start=0.0)  # type: ignore[arg-type]


def test_schedule_asks_instances_plus_headroom_from_lead_time_before_start() -> None:
    run = runner()
    assert run.tick(ny(2026, 3, 2, 7, 54, 59), **QUIET).desired == 1
    decision = run.tick(ny(2026, 3, 2, 7, 55, 1), **QUIET)
    assert decision.desired == 8  # ceil(6 × 1.3)
    assert "6 × 1.3 = 8" in decision.reason
    assert "starts in 4m59s" in decision.reason


def test_headroom_arithmetic_does_not_round_up_float_noise() -> None:
    policy = spec(
        kind="predictive",
        headroom=0.3,
        lead_time=0,
        schedule=[{"cron": "0 0 * * *", "until": "23:59", "instances": 10}],
    )
    assert runner(policy).tick(ny(2026, 3, 4, 12, 0), **QUIET).desired == 13  # not 14


def test_the_decision_core_takes_over_when_the_window_ends() -> None:
    run = runner(current=1)
    t, end = ny(2026, 3, 2, 7, 0), ny(2026, 3, 2, 18, 0)
    while t < end:
        run.tick(t, **QUIET)
        t += 60.0
    assert run.current == 8
    after = run.tick(end + 60, **QUIET)  # idle for hours: the core's floor (0), clamped to the tier's min
    assert after.desired == 1
    assert after.reason.startswith("no schedule window now; reactive 0")


def test_missing_signals_after_a_window_never_reduce() -> None:
    run = runner(current=8)
    end = ny(2026, 3, 2, 18, 0)
    for offset in range(0, 3600, 60):
        assert run.tick(end + offset).desired == 8
    assert "unknown" in run.decisions[-1].reason


def test_overlapping_windows_take_the_larger() -> None:
    policy = spec(
        kind="predictive",
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
