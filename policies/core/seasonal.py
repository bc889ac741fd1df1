"""Daily and weekly seasonality: the rate a season ago at the horizon, scaled by how today compares.

For each season in ``SEASONS_S`` (a day, a week): the quarter-hour slot ``now + horizon − season``, times
the ratio of the last ``LEVEL_WINDOW_S`` to the same hour a season ago (clamped to ``LEVEL_CLAMP``: a
quiet holiday does not halve tomorrow). A season not yet on record (the tier is younger than a day)
says how much history it has and stays out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.core.constants import LEVEL_CLAMP, LEVEL_WINDOW_S, SEASONS_S
from scalectl.policies.core.forecast import ErrorTrack, Forecast
from scalectl.policies.core.history import Bins

NAMES = {86400.0: "daily", 7 * 86400.0: "weekly"}


@dataclass(frozen=True, slots=True)
class SeasonalState:
    errors: Mapping[str, ErrorTrack] = field(default_factory=dict)  # season name → its errors

    def to_dict(self) -> dict[str, Any]:
        return {name: track.to_dict() for name, track in self.errors.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SeasonalState:
        return cls({str(k): ErrorTrack.from_dict(v) for k, v in (data or {}).items()})


def observe(
    state: SeasonalState, slots: Bins, *, now: float, rate: float, horizon: float
) -> tuple[SeasonalState, list[Forecast]]:
    errors, out = dict(state.errors), []
    for season in SEASONS_S:
        name = NAMES.get(season, f"{season:g}s")
        track = errors.get(name, ErrorTrack()).settle(now, rate)
        value, note = _seasonal(slots, now, horizon, season)
        if value is not None:
            track = track.file(now, now + horizon, value)
        errors[name] = track
        out.append(Forecast(name, value, track.quantile(), note))
    return SeasonalState(errors), out


def _seasonal(slots: Bins, now: float, horizon: float, season: float) -> tuple[float | None, str]:
    width = slots.width
    then = slots.rate(math.floor((now + horizon - season) / width))
    current = math.floor(now / width)
    window = range(current - round(LEVEL_WINDOW_S / width), current)
    recent = [slots.rate(i) for i in window]
    before = [slots.rate(i - round(season / width)) for i in window]
    if then is None or None in recent or None in before:
        seen = (current - min(slots.counts, default=current)) * width
        return None, f"too little history: {seen / 3600:.0f} h of {season / 3600:.0f} h"
    past = statistics.fmean(v for v in before if v is not None)
    ratio = statistics.fmean(v for v in recent if v is not None) / past if past > 0 else 1.0
    ratio = min(max(ratio, LEVEL_CLAMP[0]), LEVEL_CLAMP[1])
    return then * ratio, f"×{ratio:.2f} of a season ago"
