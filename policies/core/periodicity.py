"""Recurring bursts found in the tier's own history: a period, and the rate at each phase of it.

Once a bin completes, the autocorrelation of the series less its least-squares line (a slow diurnal trend
drops out) is computed at every lag that fits ``MIN_CYCLES`` times into the history. A lag
is a period when its autocorrelation reaches ``ACF_MIN`` and ``ACF_Z`` standard errors of white noise
(1/√pairs) and has risen again by ``ACF_DIP`` since a dip at a shorter lag (a block of traffic, persistent
but not periodic, decays without one), the shortest lag within ``HARMONIC`` of the best wins (multiples
echo the period), and the profile's peak stands ``SIGMAS`` of Poisson noise above its median: Poisson
traffic shows none. The
profile is the mean rate at each phase (bin index mod period, so it stays put as time goes on).

It forecasts the rate at ``now + horizon`` (sizing), and the highest rate within it with when it is due
(behaviour: never release what a burst due within a boot will need). Fewer than ``MIN_HISTORY_BINS`` known
bins: it says so and stays out.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.common import dur
from scalectl.policies.core.constants import (
    ACF_DIP,
    ACF_MIN,
    ACF_Z,
    HARMONIC,
    MIN_CYCLES,
    MIN_HISTORY_BINS,
    SIGMAS,
)
from scalectl.policies.core.forecast import ErrorTrack, Forecast
from scalectl.policies.core.history import Bins


@dataclass(frozen=True, slots=True)
class PeriodState:
    period: int | None = None  # bins; None: none found
    profile: tuple[float, ...] = ()  # mean rate at each phase (bin index mod period)
    checked: int | None = None  # the last complete bin the search ran on
    note: str = "no history yet"
    errors: ErrorTrack = field(default_factory=ErrorTrack)

    def to_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "profile": list(self.profile),
            "checked": self.checked,
            "note": self.note,
            "errors": self.errors.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PeriodState:
        data = data or {}
        period = data.get("period")
        return cls(
            None if period is None else int(period),
            tuple(float(v) for v in data.get("profile", ())),
            data.get("checked"),
            str(data.get("note", "no history yet")),
            ErrorTrack.from_dict(data.get("errors")),
        )


@dataclass(frozen=True, slots=True)
class Burst:
    peak: float  # units/s at the highest phase within the horizon
    due_in: float  # seconds until that phase begins (0: under way)
    period_s: float
    burst: bool = True  # the window reaches the profile's bursts (above halfway from its median to its top)


def observe(
    state: PeriodState, bins: Bins, *, now: float, rate: float, horizon: float, grain: float, min_lag: int, label: str
) -> tuple[PeriodState, Forecast]:
    """Search again once a bin has completed; settle and file errors; forecast the rate at now + horizon."""
    last = bins.last_complete(now)
    if state.checked != last:  # the series is built only then: most ticks complete no bin
        first, series = bins.series(now)
        period, profile, note = _search(first, series, bins.width, grain, min_lag)
        state = PeriodState(period, profile, last, note, state.errors)
    errors = state.errors.settle(now, rate)
    if state.period is None:
        return _with(state, errors), Forecast(label, None, None, state.note)
    value = state.profile[math.floor((now + horizon) / bins.width) % state.period]
    errors = errors.file(now, now + horizon, value)
    return _with(state, errors), Forecast(f"{dur(state.period * bins.width)} period", value, errors.quantile())


def _with(state: PeriodState, errors: ErrorTrack) -> PeriodState:
    return PeriodState(state.period, state.profile, state.checked, state.note, errors)


def burst_within(state: PeriodState, width: float, now: float, horizon: float) -> Burst | None:
    """The highest phase from now until ``now + horizon``, due when the burst first reaches half its
    height above the profile's median (its onset, not its top minute)."""
    period, profile = state.period, state.profile
    if period is None:
        return None
    window = range(math.floor(now / width), math.floor((now + horizon) / width) + 1)
    peak = max(profile[i % period] for i in window)
    half = min(peak, (peak + statistics.median(profile)) / 2)  # a window in a lull: its own highest bin
    onset = next(i for i in window if profile[i % period] >= half)
    centre = statistics.median(profile)
    burst = peak >= (centre + max(profile)) / 2
    return Burst(peak, max(0.0, onset * width - now), period * width, burst)


def _search(
    first: int, series: list[float | None], width: float, grain: float, min_lag: int
) -> tuple[int | None, tuple[float, ...], str]:
    known = sum(v is not None for v in series)
    if known < MIN_HISTORY_BINS:
        return None, (), f"too little history: {known} of {MIN_HISTORY_BINS} bins of {dur(width)}"
    residuals = _detrended(series)
    known_residuals = [r for r in residuals if r is not None]
    var = math.fsum([r * r for r in known_residuals]) / len(known_residuals)  # the same at every lag
    whole = known_residuals if len(known_residuals) == len(residuals) else None  # no bin unknown
    raw = {lag: _acf(residuals, lag, var, whole) for lag in range(1, len(series) // MIN_CYCLES + 1)}
    scores = {
        lag: acf
        for lag, (acf, pairs) in raw.items()
        if lag >= min_lag
        and acf >= max(ACF_MIN, ACF_Z / math.sqrt(max(pairs, 1)))
        and min(raw[k][0] for k in range(1, lag)) <= acf - ACF_DIP  # it rose again after a dip
    }
    if not scores:
        return None, (), "no recurring burst"
    best = max(scores.values())
    period = min(lag for lag, acf in scores.items() if acf >= HARMONIC * best)
    profile = _profile(first, series, period)
    centre = statistics.median(profile)
    cycles = known / period
    noise = math.sqrt(max(centre, 0.0) * width * grain) / width / math.sqrt(cycles)
    if max(profile) - centre <= SIGMAS * noise:
        return None, (), "no recurring burst (a period too faint for its noise)"
    return period, profile, ""


def _detrended(series: list[float | None]) -> list[float | None]:
    """The series less its least-squares line (first differences would do too, but double white noise's
    variance at every lag, and then Poisson traffic shows periods)."""
    points = [(i, v) for i, v in enumerate(series) if v is not None]
    mx, my = statistics.fmean(i for i, _ in points), statistics.fmean(v for _, v in points)
    sxx = sum((i - mx) ** 2 for i, _ in points)
    slope = sum((i - mx) * (v - my) for i, v in points) / sxx if sxx else 0.0
    return [None if v is None else v - my - slope * (i - mx) for i, v in enumerate(series)]


def _acf(residuals: list[float | None], lag: int, var: float, whole: list[float] | None) -> tuple[float, int]:
    """Autocorrelation at ``lag`` and the pairs it rests on (0.0 where it cannot be measured); ``var``: the
    mean square of the known residuals; ``whole``: the residuals when every bin is known. Means are
    ``math.fsum`` over the products, as ``statistics.fmean`` computes them, without its wrapper around a
    generator (that wrapper was a third of a policy's time in a simulated day)."""
    if whole is not None:  # every pair counts: the products in C, half the time of a filtered list
        n = len(whole) - lag
        if var <= 0 or n < 2:
            return 0.0, max(n, 0)
        return math.fsum(map(operator.mul, whole, whole[lag:])) / n / var, n
    pairs = [a * b for a, b in zip(residuals, residuals[lag:], strict=False) if a is not None and b is not None]
    if var <= 0 or len(pairs) < 2:
        return 0.0, len(pairs)
    return math.fsum(pairs) / len(pairs) / var, len(pairs)


def _profile(first: int, series: list[float | None], period: int) -> tuple[float, ...]:
    sums, counts = [0.0] * period, [0] * period
    for i, v in enumerate(series):
        if v is not None:
            sums[(first + i) % period] += v
            counts[(first + i) % period] += 1
    overall = statistics.fmean(v for v in series if v is not None)
    return tuple(s / c if c else overall for s, c in zip(sums, counts, strict=True))
