"""A forecast and its measured error: what every demand forecaster hands to sizing.

Each forecaster files what it predicted for ``now + horizon`` (at most every ``ERR_SAMPLE_S``); when that
moment comes, the rate seen then settles it as an error, actual − predicted. Sizing adds the
``ERR_QUANTILE`` of the recent errors (an over-forecast is no shortfall: the quantile is floored at 0),
so headroom is what this forecaster has been missing by lately, not a constant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scalectl.policies.core.constants import ERR_KEEP, ERR_MIN, ERR_QUANTILE, ERR_SAMPLE_S


@dataclass(frozen=True, slots=True)
class Forecast:
    name: str  # "trend", "surge", "15m period", "daily", …: what the reason calls it
    value: float | None  # units per second at now + horizon; None: too little history, out of the decision
    err: float | None  # the recent shortfall quantile; None: not measured yet
    note: str = ""  # why it is out, or a detail for the reason

    @property
    def usable(self) -> bool:
        return self.value is not None


@dataclass(frozen=True, slots=True)
class ErrorTrack:
    pending: tuple[tuple[float, float, float], ...] = ()  # (filed at, due at, predicted), oldest first
    errors: tuple[float, ...] = ()  # actual − predicted, oldest first
    last: tuple[float, float] | None = None  # the latest settled forecast: (predicted, actual), for dashboards

    def settle(self, now: float, actual: float) -> ErrorTrack:
        """Forecasts due by now become errors against the rate seen now."""
        due = [p for p in self.pending if p[1] <= now]
        if not due:
            return self
        errors = (*self.errors, *(actual - p[2] for p in due))[-ERR_KEEP:]
        return ErrorTrack(tuple(p for p in self.pending if p[1] > now), errors, (due[-1][2], actual))

    def file(self, now: float, due: float, predicted: float) -> ErrorTrack:
        if self.pending and now - self.pending[-1][0] < ERR_SAMPLE_S:
            return self
        return ErrorTrack((*self.pending, (now, due, predicted)), self.errors, self.last)

    @property
    def ahead(self) -> float | None:
        """The newest forecast filed (for its due time), None before the first."""
        return self.pending[-1][2] if self.pending else None

    def quantile(self) -> float | None:
        """The ``ERR_QUANTILE`` shortfall, at least 0; None with fewer than ``ERR_MIN`` errors."""
        if len(self.errors) < ERR_MIN:
            return None
        return max(0.0, quantile(self.errors, ERR_QUANTILE))

    def to_dict(self) -> dict[str, Any]:
        last = None if self.last is None else list(self.last)
        return {"pending": [list(p) for p in self.pending], "errors": list(self.errors), "last": last}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ErrorTrack:
        data = data or {}
        pending = tuple((float(a), float(b), float(c)) for a, b, c in data.get("pending", ()))
        last = data.get("last")
        settled = None if not last else (float(last[0]), float(last[1]))
        return cls(pending, tuple(float(e) for e in data.get("errors", ())), settled)


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (no interpolation: an error that happened, not one between two)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]
