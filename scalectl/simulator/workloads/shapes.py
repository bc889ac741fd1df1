"""Load shapes: multipliers over time (diurnal, spike, daily points, constant) that combine by product."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scalectl.policies.durations import Duration
from scalectl.policies.spec import iana_timezone
from scalectl.simulator.requests import FloatArray

_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
DAY = 86400.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _hhmm_seconds(text: str) -> float:
    m = _HHMM.match(text.strip())
    if not m:
        raise ValueError(f'expected a time of day like "08:00", got {text!r}')
    return int(m.group(1)) * 3600.0 + int(m.group(2)) * 60.0


@lru_cache(maxsize=200_000)
def _offset_at_hour(timezone: str, hour: int) -> float:
    """UTC offset (seconds) of the local time at the start of UTC hour ``hour``."""
    offset = datetime.fromtimestamp(hour * 3600.0, tz=UTC).astimezone(ZoneInfo(timezone)).utcoffset()
    return offset.total_seconds() if offset else 0.0


def local_offsets(epoch: FloatArray, timezone: str) -> FloatArray | float:
    """The UTC offset (seconds) at each of ``epoch``: one number when the span has one (no clock change)."""
    if epoch.shape[0] == 0:
        return 0.0
    first, last = int(np.floor(epoch.min() / 3600.0)), int(np.floor(epoch.max() / 3600.0))
    # One offset per hour in the span, looked up by position: sorting a block's million times to find its
    # distinct hours cost more than the rest of the shape.
    offsets = np.array([_offset_at_hour(timezone, h) for h in range(first, last + 1)])
    if (offsets == offsets[0]).all():
        return float(offsets[0])
    return offsets[np.floor(epoch / 3600.0).astype(np.int64) - first]


def local_seconds(epoch: FloatArray, timezone: str) -> FloatArray:
    """Seconds since local midnight for epoch seconds ``epoch``."""
    return np.mod(epoch + local_offsets(epoch, timezone), DAY)


def local_clock(epoch: FloatArray, timezone: str) -> tuple[FloatArray, np.ndarray]:
    """Seconds since local midnight and local weekday (0 = Monday) for epoch seconds ``epoch``."""
    local = epoch + local_offsets(epoch, timezone)
    seconds = np.mod(local, DAY)
    # The weekday of the local time itself (the hour's weekday can differ right after local midnight).
    weekday = np.floor(local / DAY).astype(np.int64) + 3  # 1970-01-01 was a Thursday (weekday 3)
    return seconds, np.mod(weekday, 7)


class ConstantShape(_Strict):
    kind: Literal["constant"]
    factor: float = Field(1.0, ge=0)

    def values(self, t: FloatArray, start_epoch: float) -> FloatArray:
        return np.full(t.shape, self.factor)


class DiurnalShape(_Strict):
    """Busy during ``peak`` local hours (1.0), ``low`` at night, linear ramps of ``ramp`` either side."""

    kind: Literal["diurnal"]
    peak: str = "08:00-18:00"
    timezone: str = "UTC"
    low: float = Field(0.1, ge=0, le=1)
    ramp: Duration = 3600.0
    weekend: float = Field(1.0, ge=0)  # multiplier on Saturdays and Sundays

    @field_validator("timezone")
    @classmethod
    def _timezone_exists(cls, value: str) -> str:
        return iana_timezone(value)

    @field_validator("peak")
    @classmethod
    def _peak_window(cls, value: str) -> str:
        parts = value.split("-")
        if len(parts) != 2:
            raise ValueError(f'expected a local time window like "08:00-18:00", got {value!r}')
        for p in parts:
            _hhmm_seconds(p)
        return value

    def values(self, t: FloatArray, start_epoch: float) -> FloatArray:
        seconds, weekday = local_clock(start_epoch + t, self.timezone)
        begin, end = (_hhmm_seconds(p) for p in self.peak.split("-"))
        length = np.mod(end - begin, DAY) or DAY
        into = np.mod(seconds - begin, DAY)  # seconds since the window opened (wraps past midnight)
        ramp = max(self.ramp, 1e-9)
        inside = np.clip(np.minimum((into + ramp) / ramp, (length + ramp - into) / ramp), 0.0, 1.0)
        before = np.clip((ramp - (DAY - into)) / ramp, 0.0, 1.0)  # ramping up ahead of the window
        level = np.maximum(np.where(into < length + ramp, inside, 0.0), before)
        value = self.low + (1.0 - self.low) * level
        return np.where(weekday >= 5, value * self.weekend, value)


class SpikeShape(_Strict):
    """``factor`` × the load for ``duration`` from ``at`` after the start (and every ``every`` after)."""

    kind: Literal["spike"]
    at: Duration
    duration: Duration = 600.0
    factor: float = Field(1.3, ge=0)
    every: Duration | None = None

    def values(self, t: FloatArray, start_epoch: float) -> FloatArray:
        since = t - self.at
        if self.every:
            since = np.where(since >= 0, np.mod(since, self.every), since)
        return np.where((since >= 0) & (since < self.duration), self.factor, 1.0)


class DailyShape(_Strict):
    """Piecewise-linear daily profile through ``points`` (local "HH:MM" → multiplier), wrapping at midnight."""

    kind: Literal["daily"]
    points: list[tuple[str, float]] = Field(min_length=1)
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _timezone_exists(cls, value: str) -> str:
        return iana_timezone(value)

    @model_validator(mode="after")
    def _points_valid(self) -> DailyShape:
        for when, value in self.points:
            _hhmm_seconds(when)
            if value < 0:
                raise ValueError(f"points: multiplier at {when} must be >= 0, got {value}")
        return self

    def values(self, t: FloatArray, start_epoch: float) -> FloatArray:
        seconds = local_seconds(start_epoch + t, self.timezone)
        pts = sorted((_hhmm_seconds(w), v) for w, v in self.points)
        xs = np.array([p[0] for p in pts])
        ys = np.array([p[1] for p in pts])
        xs = np.concatenate([xs - DAY, xs, xs + DAY])
        ys = np.concatenate([ys, ys, ys])
        return np.interp(seconds, xs, ys)


Shape = Annotated[ConstantShape | DiurnalShape | SpikeShape | DailyShape, Field(discriminator="kind")]


def evaluate(shapes: Sequence[Shape], t: FloatArray, start_epoch: float) -> FloatArray:
    """The product of ``shapes`` at virtual times ``t`` (1.0 when there are none)."""
    out = np.ones(t.shape)
    for shape in shapes:
        out = out * shape.values(t, start_epoch)
    return out


def peak_over(
    shapes: Sequence[Shape],
    t0: float,
    t1: float,
    start_epoch: float,
    resolution_s: float = 10.0,
    margin: float = 1.0001,
) -> float:
    """The largest shape product over [t0, t1) (× ``margin``), sampled finely enough for spikes and ramps."""
    if not shapes:
        return 1.0
    grid = np.arange(t0, t1 + resolution_s, resolution_s)
    return float(evaluate(shapes, grid, start_epoch).max()) * margin
