"""Schedule windows: cron start in a timezone, lead time, same-day end, DST, standard cron day-of-week."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

import pytest

from scalectl.policies.schedule import active_window
from scalectl.policies.spec import ScheduleWindow

NY = ZoneInfo("America/New_York")
WEEKDAYS_8_TO_18 = ScheduleWindow(cron="0 8 * * mon-fri", until="18:00", instances=6, timezone="America/New_York")
LEAD = 300.0


def at(tz: tzinfo, *parts: int) -> float:
    return datetime(*parts, tzinfo=tz).timestamp()  # type: ignore[misc, arg-type]


def test_active_from_lead_time_before_start_until_the_end() -> None:
    monday = (2026, 3, 2)  # EST (UTC-5)
    assert active_window(WEEKDAYS_8_TO_18, at(NY, *monday, 7, 54, 59), LEAD) is None
    hit = active_window(WEEKDAYS_8_TO_18, at(NY, *monday, 7, 55, 1), LEAD)
    assert hit is not None
    assert hit.start == at(NY, *monday, 8, 0)
    assert hit.end == at(NY, *monday, 18, 0)
    assert active_window(WEEKDAYS_8_TO_18, at(NY, *monday, 17, 59, 59), LEAD) is not None
    assert active_window(WEEKDAYS_8_TO_18, at(NY, *monday, 18, 0, 0), LEAD) is None


def test_mon_fri_skips_the_weekend_and_friday_evening_leads_into_nothing() -> None:
    assert active_window(WEEKDAYS_8_TO_18, at(NY, 2026, 3, 7, 12, 0), LEAD) is None  # Saturday
    assert active_window(WEEKDAYS_8_TO_18, at(NY, 2026, 3, 8, 12, 0), LEAD) is None  # Sunday
    assert active_window(WEEKDAYS_8_TO_18, at(NY, 2026, 3, 6, 12, 0), LEAD) is not None  # Friday


def test_sunday_is_day_zero_as_in_crontab() -> None:
    sundays = ScheduleWindow(cron="0 8 * * 0", until="12:00", instances=1, timezone="UTC")
    assert active_window(sundays, at(UTC, 2026, 3, 8, 9, 0), 0) is not None  # Sunday
    assert active_window(sundays, at(UTC, 2026, 3, 9, 9, 0), 0) is None  # Monday


@pytest.mark.parametrize(
    ("label", "day", "utc_start_hour"),
    [
        ("before spring-forward (EST)", (2026, 3, 6), 13),
        ("after spring-forward (EDT)", (2026, 3, 9), 12),
        ("before fall-back (EDT)", (2026, 10, 30), 12),
        ("after fall-back (EST)", (2026, 11, 2), 13),
    ],
)
def test_local_start_follows_daylight_saving(label: str, day: tuple[int, int, int], utc_start_hour: int) -> None:
    start_utc = at(UTC, *day, utc_start_hour, 0)
    assert active_window(WEEKDAYS_8_TO_18, start_utc - LEAD - 1, LEAD) is None, label
    hit = active_window(WEEKDAYS_8_TO_18, start_utc - LEAD + 1, LEAD)
    assert hit is not None, label
    assert hit.start == start_utc
    assert hit.end == start_utc + 10 * 3600


def test_window_on_the_day_clocks_change() -> None:
    daily = ScheduleWindow(cron="0 1 * * *", until="05:00", instances=2, timezone="America/New_York")
    # 2026-03-08: 02:00 EST jumps to 03:00 EDT, so 01:00–05:00 local lasts 3 hours.
    hit = active_window(daily, at(NY, 2026, 3, 8, 4, 30), 0)
    assert hit is not None
    assert hit.end - hit.start == 3 * 3600


def test_long_lead_time_reaches_into_tomorrows_window() -> None:
    night_before = at(NY, 2026, 3, 1, 23, 0)  # Sunday 23:00; Monday's window starts in 9 h
    assert active_window(WEEKDAYS_8_TO_18, night_before, 8 * 3600) is None
    hit = active_window(WEEKDAYS_8_TO_18, night_before, 10 * 3600)
    assert hit is not None
    assert hit.start == at(NY, 2026, 3, 2, 8, 0)


def test_a_firing_at_or_after_until_opens_no_window() -> None:
    evening = ScheduleWindow(cron="0 20 * * *", until="18:00", instances=3, timezone="UTC")
    for hour in range(24):
        assert active_window(evening, at(UTC, 2026, 3, 4, hour, 30), LEAD) is None


def test_every_minute_cron_is_bounded_and_active_all_window() -> None:
    busy = ScheduleWindow(cron="* 9-11 * * *", until="12:00", instances=1, timezone="UTC")
    assert active_window(busy, at(UTC, 2026, 3, 4, 11, 59), 0) is not None
    assert active_window(busy, at(UTC, 2026, 3, 4, 12, 0), 0) is None
    assert active_window(busy, at(UTC, 2026, 3, 4, 8, 58), 60) is None
    assert active_window(busy, at(UTC, 2026, 3, 4, 8, 59), 60) is not None
