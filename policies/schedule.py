"""Schedule windows: is a cron-started window (or its lead time) covering ``now``?

A window starts at each firing of ``cron`` (standard cron semantics via croniter, so "mon-fri" and
day-of-week 0 = Sunday mean what they mean in crontab) in its IANA timezone, and ends at ``until``
(HH:MM) on the same local day. A firing at or after ``until`` opens no window that day. Local times
go through zoneinfo, so a window at 08:00 New York is 08:00 on both sides of a DST change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from policies.spec import ScheduleWindow

# A bound on cron firings examined per call (a "* * * * *" window walks at most a day of minutes).
_MAX_FIRINGS = 2000


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


def active_window(window: ScheduleWindow, now: float, lead_time: float) -> WindowHit | None:
    """The occurrence with start − lead_time ≤ now < end, or None.

    Only windows ending after ``now`` can match: those of today (if ``until`` is still ahead) or later
    days whose start is within ``lead_time``. Walk firings forward from that day's local midnight.
    """
    tz = ZoneInfo(window.timezone)
    until = _until(window)
    local_now = datetime.fromtimestamp(now, tz)
    day = local_now.date()
    if local_now.time() >= until:
        day += timedelta(days=1)
    latest_start = now + lead_time
    firings = croniter(window.cron, _local_midnight(day, tz) - timedelta(seconds=1))
    for _ in range(_MAX_FIRINGS):
        fired: datetime = firings.get_next(datetime)
        if fired.timestamp() > latest_start:
            return None
        local_day = fired.astimezone(tz).date()
        end = datetime.combine(local_day, until, tzinfo=tz)
        if fired < end:
            if now < end.timestamp():
                return WindowHit(fired.timestamp(), end.timestamp(), fired.astimezone(tz), end)
        else:  # fired at or after `until`: nothing more opens that day
            firings = croniter(window.cron, _local_midnight(local_day + timedelta(days=1), tz) - timedelta(seconds=1))
    return None
