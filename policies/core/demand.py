"""Demand now and a boot horizon ahead: the arrival rate, a surge detector and a short trend.

- **Baseline**: the rate averaged with a ``STABLE_HALF_LIFE_S`` half-life (Knative KPA's stable window).
- **Surge** (KPA's panic window, one tick long): a tick whose count, less ``SIGMAS`` of its Poisson noise,
  runs at ``SURGE_RATIO`` × the baseline or more. The trend restarts at the surge (the step is not a
  slope to carry on), and for ``PANIC_HOLD_S`` the newest tick is the level: a step is followed in the
  tick it shows, whole.
- **Trend**: Theil–Sen (the median of pairwise slopes) through the ticks of the last ``TREND_S`` since any
  surge; a rise of ``TREND_Z`` standard errors (of a line through ticks with their scatter or Poisson
  noise, whichever is more) is carried on to the horizon. A fall is never projected: scale-in has its own guards.

The forecast is the rate at ``now + horizon``, and its error the recent shortfall (forecast.py). A
backlog is not demand: it never enters these figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.core.constants import (
    LEVEL_TICKS,
    MIN_TREND_TICKS,
    PANIC_HOLD_S,
    SIGMAS,
    STABLE_HALF_LIFE_S,
    SURGE_RATIO,
    TREND_MAX_TICKS,
    TREND_S,
    TREND_Z,
)
from scalectl.policies.core.forecast import ErrorTrack, Forecast


@dataclass(frozen=True, slots=True)
class DemandState:
    stable: float | None = None  # baseline rate (units/s)
    ticks: tuple[tuple[float, float], ...] = ()  # (time, rate) since the last surge, newest last
    surge_at: float | None = None  # when the last surge began
    errors: ErrorTrack = field(default_factory=ErrorTrack)
    # (time, rate less its Poisson noise) of the ticks within one stable window: the load a reading window's
    # latency may have met, where the baseline still lags a burst
    recent: tuple[tuple[float, float], ...] = ()

    @property
    def peak(self) -> float:
        """The highest rate of the last stable window, less each tick's Poisson noise (0 before any tick)."""
        return max((r for _, r in self.recent), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stable": self.stable,
            "ticks": [list(t) for t in self.ticks],
            "surge_at": self.surge_at,
            "errors": self.errors.to_dict(),
            "recent": [list(t) for t in self.recent],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> DemandState:
        data = data or {}
        return cls(
            data.get("stable"),
            tuple((float(t), float(r)) for t, r in data.get("ticks", ())),
            data.get("surge_at"),
            ErrorTrack.from_dict(data.get("errors")),
            tuple((float(t), float(r)) for t, r in data.get("recent", ())),
        )


def observe(
    state: DemandState, *, now: float, tick_s: float, count: float, grain: float, horizon: float
) -> tuple[DemandState, Forecast]:
    """File one tick's arrivals (``count`` units over ``tick_s``; ``grain`` units per independent arrival,
    1 for requests) and forecast the rate at ``now + horizon``."""
    rate = count / tick_s
    low_edge = max(0.0, count - SIGMAS * math.sqrt(max(count, 0.0) * grain)) / tick_s
    surge = state.stable is not None and low_edge >= SURGE_RATIO * state.stable and rate > 0
    kept = (*(t for t in state.ticks if t[0] > now - TREND_S), (now, rate))[-TREND_MAX_TICKS:]
    ticks = ((now, rate),) if surge else kept
    surge_at = now if surge else state.surge_at
    keep = 0.5 ** (tick_s / STABLE_HALF_LIFE_S)
    stable = rate if state.stable is None else keep * state.stable + (1 - keep) * rate
    errors = state.errors.settle(now, rate)
    panicking = surge_at is not None and now - surge_at <= PANIC_HOLD_S
    value, how = _project(ticks, now, horizon, tick_s, grain, panicking)
    name = "surge" if panicking else "trend"
    errors = errors.file(now, now + horizon, value)
    recent = (*(p for p in state.recent if p[0] > now - STABLE_HALF_LIFE_S), (now, low_edge))
    new = DemandState(stable, ticks, surge_at, errors, recent)
    return new, Forecast(name, value, errors.quantile(), how)


def _project(
    ticks: tuple[tuple[float, float], ...], now: float, horizon: float, tick_s: float, grain: float, panicking: bool
) -> tuple[float, str]:
    """The rate at ``now + horizon`` and how it was found."""
    rates = [r for _, r in ticks]
    level = rates[-1] if panicking and len(rates) < MIN_TREND_TICKS else statistics.median(rates[-LEVEL_TICKS:])
    if len(ticks) < MIN_TREND_TICKS:
        return level, "level"
    slope = _theil_sen(ticks)
    t_last = ticks[-1][0]
    at_last = statistics.median(r - slope * (t - t_last) for t, r in ticks)
    scatter = statistics.median(abs(r - at_last - slope * (t - t_last)) for t, r in ticks) * 1.4826
    noise = math.sqrt(max(at_last, 0.0) * tick_s * grain) / tick_s  # one tick's Poisson noise, as a rate
    n = len(ticks)
    rise = slope * (t_last - ticks[0][0])
    standard_error = max(scatter, noise) * (n - 1) * math.sqrt(12 / (n * (n * n - 1)))  # of a line's rise over n ticks
    if slope <= 0 or rise <= TREND_Z * standard_error:
        return level, "level"
    return max(level, at_last + slope * (now - t_last + horizon)), f"rising {slope:.2g}/s"


def _theil_sen(points: tuple[tuple[float, float], ...]) -> float:
    # The pairs' slopes as a list, one row at a time: a generator over every pair cost a quarter more.
    slopes: list[float] = []
    for i, (ta, ra) in enumerate(points):
        slopes += [(rb - ra) / (tb - ta) for tb, rb in points[i + 1 :] if tb > ta]
    return statistics.median(slopes)
