"""The decision core composed: ``decide(inputs, state, now) -> (desired, reason, new_state)``.

signals ─► demand (trend/surge, periods, seasons; each with its error) ─► capacity (prior, learned both
ways) ─► sizing (need at now + boot horizon) ─► behaviour (out at once, in slowly, never into a burst
due) ─► guards (min/max, budget). Each measure (requests, and tokens where the engine model gives a
compute prior) runs the same estimators in its own units; the larger need wins, as an HPA with two
metrics. docs/decision-core.md has the whole picture.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.common import ceil_count, dur
from scalectl.policies.core import behaviour, capacity, demand, periodicity, seasonal
from scalectl.policies.core.constants import (
    COLD_HEADROOM,
    DEFAULT_HORIZON_S,
    DRAIN_S,
    MIN_CYCLES,
    MIN_LAG,
    MINUTE_S,
    MINUTES_KEPT,
    SLOT_S,
    SLOTS_KEPT,
    STALE_S,
)
from scalectl.policies.core.guards import guard
from scalectl.policies.core.history import Bins
from scalectl.policies.core.sizing import Need, size
from scalectl.policies.types import Bounds

# The hour-scale search starts where the minute one ends (an hour: three cycles in three hours of minutes).
SLOT_MIN_LAG = math.ceil(MINUTES_KEPT * MINUTE_S / MIN_CYCLES / SLOT_S)


@dataclass(frozen=True, slots=True)
class Reading:
    """One measure this tick. ``count`` None: unknown (missing, failed), never zero."""

    name: str  # "requests", "tokens"
    unit: str  # "req/s", "tokens/s"
    count: float | None  # units arrived since the previous tick
    prior: float | None  # units/s one instance carries at the SLO, from the engine model; None: unknown
    grain: float = 1.0  # units per independent arrival (1 for requests; tokens per request for tokens)
    backlog: float | None = None  # units waiting: drained, never forecast (None where not measured)


@dataclass(frozen=True, slots=True)
class CoreInputs:
    readings: tuple[Reading, ...]
    current: int  # instances counted toward the tier (booting included)
    ready: int  # of those, serving
    floor: int
    bounds: Bounds
    ttft_s: float | None  # the held TTFT quantile over the reading window
    ttft_target_s: float
    horizon_s: float | None  # the boot path's high percentile; None: not measured yet
    read_at: float | None  # when the readings were taken; None: unknown


@dataclass(frozen=True, slots=True)
class MeasureState:
    demand: demand.DemandState = field(default_factory=demand.DemandState)
    minutes: Bins = field(default_factory=lambda: Bins(MINUTE_S, MINUTES_KEPT))
    slots: Bins = field(default_factory=lambda: Bins(SLOT_S, SLOTS_KEPT))
    minute_period: periodicity.PeriodState = field(default_factory=periodicity.PeriodState)
    hour_period: periodicity.PeriodState = field(default_factory=periodicity.PeriodState)
    seasonal: seasonal.SeasonalState = field(default_factory=seasonal.SeasonalState)
    capacity: capacity.CapacityState = field(default_factory=capacity.CapacityState)

    def to_dict(self) -> dict[str, Any]:
        return {
            "demand": self.demand.to_dict(),
            "minutes": self.minutes.to_dict(),
            "slots": self.slots.to_dict(),
            "minute_period": self.minute_period.to_dict(),
            "hour_period": self.hour_period.to_dict(),
            "seasonal": self.seasonal.to_dict(),
            "capacity": self.capacity.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasureState:
        return cls(
            demand.DemandState.from_dict(data.get("demand")),
            Bins.from_dict(data.get("minutes") or {}, MINUTE_S, MINUTES_KEPT),
            Bins.from_dict(data.get("slots") or {}, SLOT_S, SLOTS_KEPT),
            periodicity.PeriodState.from_dict(data.get("minute_period")),
            periodicity.PeriodState.from_dict(data.get("hour_period")),
            seasonal.SeasonalState.from_dict(data.get("seasonal")),
            capacity.CapacityState.from_dict(data.get("capacity")),
        )


@dataclass(frozen=True, slots=True)
class CoreState:
    last_t: float | None = None  # the previous tick: the readings' counts are since then
    measures: Mapping[str, MeasureState] = field(default_factory=dict)
    behaviour: behaviour.BehaviourState = field(default_factory=behaviour.BehaviourState)

    def to_dict(self) -> dict[str, Any]:
        return {
            "last_t": self.last_t,
            "measures": {name: m.to_dict() for name, m in self.measures.items()},
            "behaviour": self.behaviour.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CoreState:
        data = data or {}
        measures = {str(k): MeasureState.from_dict(v) for k, v in (data.get("measures") or {}).items()}
        return cls(data.get("last_t"), measures, behaviour.BehaviourState.from_dict(data.get("behaviour")))


def decide(inputs: CoreInputs, state: CoreState, now: float) -> tuple[int, str, CoreState]:
    why = _unknown(inputs, state, now)
    if why:
        desired, text, moved = behaviour.unknown(state.behaviour, current=inputs.current, floor=inputs.floor, why=why)
        return _guarded(desired, text, inputs.bounds, CoreState(now, state.measures, moved))
    assert state.last_t is not None
    measures = dict(state.measures)
    needs: list[Need] = []
    holds: list[behaviour.Hold] = []
    for reading in inputs.readings:
        measures[reading.name], need, hold = _measure(inputs, reading, measures.get(reading.name), state.last_t, now)
        needs.append(need)
        if hold is not None:
            holds.append(hold)
    need = max(needs, key=lambda n: n.count)
    hold = max(holds, key=lambda h: h.count, default=None)
    idle = all(r.count == 0 and not r.backlog for r in inputs.readings)
    desired, text, moved = behaviour.move(
        state.behaviour, now=now, need=need.count, current=inputs.current, floor=inputs.floor, idle=idle, hold=hold
    )
    return _guarded(desired, f"{need.text}; {text}", inputs.bounds, CoreState(now, measures, moved))


def _unknown(inputs: CoreInputs, state: CoreState, now: float) -> str:
    """Why this tick cannot size (a sentence), or "" when it can."""
    if inputs.read_at is None or not inputs.readings:
        return "readings unknown"
    if now - inputs.read_at > STALE_S:
        return f"readings stale (taken {dur(now - inputs.read_at)} ago)"
    missing = [r.name for r in inputs.readings if r.count is None]
    if missing:
        return f"{', '.join(missing)} unknown"
    if any(r.prior is None for r in inputs.readings):
        return "capacity per instance unknown (no engine model prior)"
    if state.last_t is None or not now > state.last_t:
        return "first reading: no rate yet"
    return ""


def _measure(
    inputs: CoreInputs, reading: Reading, previous: MeasureState | None, last_t: float, now: float
) -> tuple[MeasureState, Need, behaviour.Hold | None]:
    assert reading.count is not None and reading.prior is not None
    m = previous or MeasureState()
    horizon = inputs.horizon_s if inputs.horizon_s is not None else DEFAULT_HORIZON_S
    tick_s, count, grain = now - last_t, reading.count, reading.grain
    rate = count / tick_s
    minutes, slots = m.minutes.add(last_t, now, count), m.slots.add(last_t, now, count)
    dem, trend = demand.observe(m.demand, now=now, tick_s=tick_s, count=count, grain=grain, horizon=horizon)
    minute_p, by_minute = periodicity.observe(
        m.minute_period,
        minutes,
        now=now,
        rate=rate,
        horizon=horizon,
        grain=grain,
        min_lag=MIN_LAG,
        label="minute periods",
    )
    hour_p, by_hour = periodicity.observe(
        m.hour_period,
        slots,
        now=now,
        rate=rate,
        horizon=horizon,
        grain=grain,
        min_lag=SLOT_MIN_LAG,
        label="hour periods",
    )
    seas, by_season = seasonal.observe(m.seasonal, slots, now=now, rate=rate, horizon=horizon)
    cap_state = capacity.observe(
        m.capacity,
        now=now,
        prior=reading.prior,
        rate=dem.stable or 0.0,
        ready=inputs.ready,
        ttft=inputs.ttft_s,
        target=inputs.ttft_target_s,
        waiting=reading.backlog,
    )
    cap = capacity.estimate(cap_state, reading.prior, inputs.ttft_target_s)
    before = m.capacity.waiting
    growing = reading.backlog is not None and reading.backlog > 0 and (before is None or reading.backlog >= before)
    backlog = reading.backlog / DRAIN_S if growing and reading.backlog is not None else 0.0
    need = size([trend, by_minute, by_hour, *by_season], cap, unit=reading.unit, horizon=horizon, backlog=backlog)
    holds = [_hold(p, b.width, now, horizon, cap.per_instance) for p, b in ((minute_p, minutes), (hour_p, slots))]
    hold = max((h for h in holds if h is not None), key=lambda h: h.count, default=None)
    return MeasureState(dem, minutes, slots, minute_p, hour_p, seas, cap_state), need, hold


def _hold(
    state: periodicity.PeriodState, width: float, now: float, horizon: float, per_instance: float
) -> behaviour.Hold | None:
    """What a recurring burst due within the horizon needs, at its own error quantile."""
    burst = periodicity.burst_within(state, width, now, horizon)
    if burst is None:
        return None
    err = state.errors.quantile()
    count = ceil_count((burst.peak + (err if err is not None else COLD_HEADROOM * burst.peak)) / per_instance)
    due = f"due in {dur(burst.due_in)}" if burst.due_in > 0 else "under way"
    return behaviour.Hold(count, f"a {dur(burst.period_s)} burst is {due}")


def _guarded(desired: int, text: str, bounds: Bounds, state: CoreState) -> tuple[int, str, CoreState]:
    value, notes = guard(desired, bounds)
    return value, (f"{text}; {notes} → {value}" if notes else text), state
