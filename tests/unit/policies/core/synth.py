"""Synthetic traffic with a known answer for the decision core's tests."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from scalectl.policies.core.history import Bins

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, a minute and a slot boundary
TICK = 15.0


def counts(rate: Callable[[float], float], ticks: int, seed: int = 0, start: float = T0) -> list[tuple[float, float]]:
    """(tick end time, Poisson arrivals in the tick) at ``rate(t)`` req/s."""
    rng = np.random.default_rng(seed)
    return [(start + (k + 1) * TICK, float(rng.poisson(rate(start + k * TICK) * TICK))) for k in range(ticks)]


def binned(bins: Bins, ticks: list[tuple[float, float]]) -> Bins:
    for t, n in ticks:
        bins = bins.add(t - TICK, t, n)
    return bins


def cron_bursts(base: float = 20.0, times: float = 6.0, every_min: int = 15) -> Callable[[float], float]:
    """``times`` × ``base`` for 2 minutes, or 3 every other cycle, every ``every_min`` minutes from T0."""

    def rate(t: float) -> float:
        minute = int((t - T0) // 60)
        long = (minute // every_min) % 2
        return base * (times if minute % every_min < 2 + long else 1.0)

    return rate


def daily(t: float) -> float:
    """A business day: 10 req/s at night, 100 at 14:00 UTC."""
    hour = ((t - T0) % 86400) / 3600
    return 10 + 90 * max(0.0, math.sin(math.pi * (hour - 6) / 16)) if 6 <= hour <= 22 else 10.0
