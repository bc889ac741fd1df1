"""Schedule windows: is a cron-started window (or its lead time) covering ``now``?

A window starts at each firing of ``cron`` (standard cron semantics via croniter, so "mon-fri" and
day-of-week 0 = Sunday mean what they mean in crontab) in its IANA timezone, and ends at ``until``
(HH:MM) on the same local day. A firing at or after ``until`` opens no window that day. Local times
go through zoneinfo, so a window at 08:00 New York is 08:00 on both sides of a DST change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import croniter

from scalectl.policies.spec import ScheduleWindow

# Days examined per call: today and as many following days as a long lead time reaches.
_MAX_DAYS = 400


@dataclass(frozen=True, slots=True)
class WindowHit:
    """The occurrence of a window that covers ``now`` (epoch seconds)."""

    start: float
    end: float
    local_start: datetime
    local_end: datetime


def _until(window: ScheduleWindow) -> time:
    hours, minutes = window.until.split(":")
    return time(int(hours), int(minutes))


def _local_midnight(day: date, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz)


@lru_cache(maxsize=4096)
def _first_firing(cron: str, timezone: str, day: date) -> datetime | None:
    """The first firing of ``cron`` on a local day, or None. Cached: it never changes."""
    tz = ZoneInfo(timezone)
    fired: datetime = croniter(cron, _local_midnight(day, tz) - timedelta(seconds=1)).get_next(datetime)
    fired = fired.astimezone(tz)
    return fired if fired.date() == day else None


def active_window(window: ScheduleWindow, now: float, lead_time: float) -> WindowHit | None:
    """The occurrence with start − lead_time ≤ now < end, or None.

    All firings of one local day before ``until`` share that day's end, so the day's first firing
    defines its window. Only days whose end is after ``now`` can match: today while ``until`` is still
    ahead, and following days whose first firing is within ``lead_time``.
    """
    tz = ZoneInfo(window.timezone)
    until = _until(window)
    local_now = datetime.fromtimestamp(now, tz)
    day = local_now.date()
    if local_now.time() >= until:
        day += timedelta(days=1)
    latest_start = now + lead_time
    for _ in range(_MAX_DAYS):
        if _local_midnight(day, tz).timestamp() > latest_start:
            return None
        fired = _first_firing(window.cron, window.timezone, day)
        end = datetime.combine(day, until, tzinfo=tz)
        if fired is not None and fired < end and fired.timestamp() <= latest_start:
            return WindowHit(fired.timestamp(), end.timestamp(), fired, end)
        day += timedelta(days=1)
    return None
