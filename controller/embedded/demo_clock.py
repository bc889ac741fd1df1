"""Where an accelerated demo's clock starts: 07:00 New York time on the latest weekday, so the example's
business-hours window (08:00–18:00 America/New_York, pre-scaled 5 min ahead) opens about one demo hour
in — a minute at `--speed 60` — whatever the wall-clock time. A restarted demo continues its own time."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

DEMO_ZONE = ZoneInfo("America/New_York")
DEMO_HOUR = 7


def demo_start(wall: float) -> float:
    local = datetime.fromtimestamp(wall, DEMO_ZONE)
    start = local.replace(hour=DEMO_HOUR, minute=0, second=0, microsecond=0)
    if start > local:
        start -= timedelta(days=1)
    while start.weekday() >= 5:  # Saturday, Sunday: the window only opens Monday to Friday
        start -= timedelta(days=1)
    return start.timestamp()


def world_start(wall: float, published_world_now: float | None) -> float:
    """The demo's start, or where the previous run's world got to when that is later (time never goes back)."""
    anchor = demo_start(wall)
    return anchor if published_world_now is None else max(anchor, published_world_now)
