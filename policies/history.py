"""Recorded demand per tier, in memory, for seasonal forecasts ("what did we need at this hour yesterday?").

Append-only in time order, bounded: entries older than ``retention`` seconds before the newest one are
dropped (amortised O(1) by advancing a start index and compacting now and then). Range peaks use
bisect to find the window, then scan it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from scalectl.policies.spec import SeasonalForecast
from scalectl.policies.types import SeasonalHistory


class DemandHistory:
    def __init__(self, retention: float):
        if retention <= 0:
            raise ValueError(f"retention must be positive seconds, got {retention!r}")
        self.retention = float(retention)
        self._times: list[float] = []
        self._values: list[float] = []
        self._start = 0  # entries before this index are expired

    @classmethod
    def for_forecast(cls, forecast: SeasonalForecast, lead_time: float = 0.0) -> DemandHistory:
        """Keep just enough for the longest period (its window reaches lead_time + horizon past it)."""
        return cls(max(forecast.periods) + forecast.horizon + lead_time)

    def __len__(self) -> int:
        return len(self._times) - self._start

    def append(self, t: float, demand: float | None) -> None:
        """Record demand at time t. Unknown demand (None) is not recorded: a gap, never a zero."""
        if demand is None:
            return
        if len(self) and t < self._times[-1]:
            raise ValueError(f"demand history must be appended in time order: {t} < {self._times[-1]}")
        self._times.append(float(t))
        self._values.append(float(demand))
        self._expire(t - self.retention)

    def entries(self) -> list[tuple[float, float]]:
        """The (t, demand) pairs kept, oldest first."""
        return list(zip(self._times[self._start :], self._values[self._start :], strict=True))

    def extend(self, entries: Iterable[tuple[float, float | None]]) -> None:
        for t, demand in entries:
            self.append(t, demand)

    def _expire(self, oldest: float) -> None:
        self._start = max(self._start, bisect_left(self._times, oldest, lo=self._start))
        if self._start > 1024 and self._start * 2 > len(self._times):
            del self._times[: self._start]
            del self._values[: self._start]
            self._start = 0

    def peak(self, start: float, end: float) -> float | None:
        """Highest demand recorded in [start, end], or None when nothing was recorded there."""
        lo = bisect_left(self._times, start, lo=self._start)
        hi = bisect_right(self._times, end, lo=lo)
        return max(self._values[lo:hi]) if hi > lo else None

    def seasonal(self, now: float, periods: Iterable[float], lead_time: float, horizon: float) -> SeasonalHistory:
        """Peak demand one period ago, over [now − period, now − period + lead_time + horizon], per period."""
        by_period: dict[float, float] = {}
        for period in periods:
            start = now - period
            found = self.peak(start, start + lead_time + horizon)
            if found is not None:
                by_period[period] = found
        return SeasonalHistory(by_period=by_period)
