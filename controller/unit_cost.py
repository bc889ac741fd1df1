"""Cost per 1,000 requests (tasks, for Celery tiers) over a window: the dollars the tier's instances billed
in it, divided by the requests its signals counted in it. Pure; the store supplies both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WINDOW = 3600.0  # the last hour
MIN_COVERAGE = 0.5  # at least half the window's minutes must have a reading, or the answer is unknown


@dataclass(frozen=True, slots=True)
class BilledSpan:
    """An instance that billed: its tier, from when, until when (None: still billing), at what $/hour."""

    tier: str
    launched: float
    ended: float | None
    price_per_hour: float


def billed_in(spans: Iterable[tuple[float, float | None, float]], start: float, end: float) -> float:
    """Dollars billed within [start, end] by instances given as (launched, ended or None, $/hour)."""
    total = 0.0
    for launched, ended, price in spans:
        seconds = min(end, ended if ended is not None else end) - max(start, launched)
        if seconds > 0:
            total += seconds * price / 3600.0
    return total


def cost_per_1k(dollars: float, requests_by_minute: Mapping[int, float], start: float, end: float) -> float | None:
    """$ per 1,000 requests, or None (unknown) when too few minutes of the window were read or none arrived."""
    minutes = max(1, round((end - start) / 60.0))
    if len(requests_by_minute) < MIN_COVERAGE * minutes:
        return None
    requests = sum(requests_by_minute.values())
    return dollars / requests * 1000.0 if requests > 0 else None
