"""A ramp: arrivals rising minute after minute, projected to when an instance launched now would serve.

Target tracking sizes for the rate it reads, and a launch serves a boot later (2–5 minutes). On a steady
load the headroom (``target_utilization``) covers that; on a morning ramp it does not: a small fleet's
headroom is a few requests per second, and a ramp of 0.3 req/s each second uses it up in a minute or two.
So each tick adds its arrivals to per-minute counts (spread over the minutes since the previous tick; the
last ``MINUTES`` full minutes are kept), and the
trend through those counts is taken by Theil–Sen (the median of the slopes between every pair of minutes):
a burst minute or two moves it little. It must rise in both halves of those minutes, at paces within a
factor of two: a step (a spike's onset, traffic reaching an idle tier) rises once, its other half flat
but for noise, and is for the burst and recent rates to size, not a trend. And the rise over the minutes
kept must exceed three times their own scatter around the trend (traffic that jumps minute to minute,
like a code assistant's, shows no ramp until its rise stands out of that) and three times a minute's
Poisson noise. The rate a launch will meet is then the trend's level now plus its slope (the later
half's, where that is less: a ramp that flattens) over the lead (the tier's measured boot time).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

MINUTES = 6  # full minutes the trend is read from
MIN_MINUTES = 4  # fewer than this: no trend
_BIN, _SINCE = "ramp.m", "ramp.since"  # "ramp.m<minute>" → arrivals counted in that minute; when counting began
LEAD_S = 300.0  # the lead until the tier has measured a boot (as predictive's lead_time)
ALIKE = 0.5  # the two halves' slopes within this ratio: a step has one flat half (noise tilts it a little)
SIGMAS = 3.0  # a plateau's noise shows a "rise" past 2σ one time in ten


@dataclass(frozen=True, slots=True)
class Ramp:
    rate: float  # arrivals per second expected ``lead`` seconds from now
    slope: float  # arrivals per second, per second
    lead: float


def observe(
    learned: Mapping[str, float], *, now: float, arrivals: float | None, since: float | None = None
) -> dict[str, float]:
    """Add this tick's arrivals to the minutes they arrived in; keep the last ``MINUTES`` full minutes. The
    arrivals counted since the previous tick (at ``since``) are spread over the minutes between the two in
    proportion to the time each covers: filed whole in the minute of the tick that counts them, ticks that
    do not divide a minute (15 s ticks that run late, a slow tick) make some minutes read a tick's worth
    high and others low, scatter that hides a ramp. A tick whose arrivals are unknown starts the counts
    afresh (a gap would read as a fall, then a rise)."""
    if arrivals is None:
        if _SINCE not in learned:  # no counts kept: nothing to drop
            return dict(learned)
        return {k: v for k, v in learned.items() if not k.startswith(_BIN) and k != _SINCE}
    minute = math.floor(now / 60.0)
    key = f"{_BIN}{minute}"
    if key in learned:  # this minute's first tick already dropped what fell out of the window
        out = dict(learned)
    else:
        out = {k: v for k, v in learned.items() if not k.startswith(_BIN) or int(k[len(_BIN) :]) >= minute - MINUTES}
    out.setdefault(_SINCE, now)
    count = max(arrivals, 0.0)
    if since is None or not since < now:
        out[key] = out.get(key, 0.0) + count
        return out
    for m in range(max(math.floor(since / 60.0), minute - MINUTES), minute + 1):
        covered = min(now, (m + 1) * 60.0) - max(since, m * 60.0)
        if covered > 0:
            out[f"{_BIN}{m}"] = out.get(f"{_BIN}{m}", 0.0) + count * covered / (now - since)
    return out


def projected(learned: Mapping[str, float], *, now: float, lead: float) -> Ramp | None:
    """The rate ``lead`` seconds from now on a ramp that stands out of the minutes' scatter, else None."""
    since = learned.get(_SINCE)
    if since is None:
        return None
    minute = math.floor(now / 60.0)
    # Full minutes only, and only those begun after counting did: a tier's first minute is a fraction of one.
    points = [
        (m, v / 60.0)
        for m in range(minute - MINUTES, minute)
        if m * 60.0 >= since and (v := learned.get(f"{_BIN}{m}")) is not None
    ]
    if len(points) < MIN_MINUTES:
        return None
    # A ramp rises in both halves of the minutes; a step (a spike's onset, traffic arriving at an idle tier)
    # rises once, and a line through it would carry the step on as if it went on rising.
    half = len(points) // 2
    earlier, later = _theil_sen(points[:half]), _theil_sen(points[half:])
    if earlier <= 0 or later <= 0 or min(earlier, later) < ALIKE * max(earlier, later):
        return None
    slope_per_minute = min(_theil_sen(points), later)  # a ramp that flattens is projected at its latest pace
    level = statistics.median(r - slope_per_minute * (m - points[-1][0]) for m, r in points)  # at the last minute
    scatter = statistics.median(abs(r - level - slope_per_minute * (m - points[-1][0])) for m, r in points) * 1.4826
    poisson = math.sqrt(max(level, 0.0) * 60.0) / 60.0  # one minute's count, as a rate
    rise = slope_per_minute * (points[-1][0] - points[0][0])
    if rise <= SIGMAS * max(scatter, poisson):
        return None
    slope = slope_per_minute / 60.0
    centre = points[-1][0] * 60.0 + 30.0  # the last full minute's middle
    return Ramp(level + slope * (now - centre + lead), slope, lead)


def _theil_sen(points: list[tuple[int, float]]) -> float:
    """The median of the slopes between every pair of (minute, rate) points."""
    return statistics.median((b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1 :])
