"""The decision core composed: ``decide(inputs, state, now) -> (desired, reason, new_state)``.

signals ─► demand (trend/surge, periods, seasons; each with its error) ─► capacity (prior, learned both
ways) ─► sizing (need at now + boot horizon) ─► behaviour (out at once, in slowly, never into a burst
due). The tier's limits (min/max, budget) come after, in policies/engine.py, as for every policy. Each
measure (requests, and tokens where the engine model gives a compute prior) runs the same estimators in
its own units; the larger need wins, as an HPA with two metrics. docs/decision-core.md has the whole picture.
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
from scalectl.policies.core.forecast import ErrorTrack, Forecast
from scalectl.policies.core.history import Bins
from scalectl.policies.core.sizing import Need, size

# The hour-scale search starts where the minute one ends (an hour: three cycles in three hours of minutes).
SLOT_MIN_LAG = math.ceil(MINUTES_KEPT * MINUTE_S / MIN_CYCLES / SLOT_S)


@dataclass(frozen=True, slots=True)
class Reading:
    """One measure this tick. ``count`` None: unknown (missing, failed), never zero."""

    name: str  # "requests", "tokens"
    unit: str  # "req/s", "tokens/s"
    count: float | None  # units arrived since the previous tick
    prior: float | None  # units/s one instance carries at the SLO, from the engine model; None: unknown
    prior_how: str = ""  # where the prior came from, for the reason
    grain: float = 1.0  # units per independent arrival (1 for requests; tokens per request for tokens)
    backlog: float | None = None  # units waiting: drained, never forecast (None where not measured)


@dataclass(frozen=True, slots=True)
class CoreInputs:
    readings: tuple[Reading, ...]
    current: int  # instances counted toward the tier (booting included)
    ready: int  # of those, serving
    floor: int
    ttft_s: float | None  # the held TTFT quantile over the reading window
    ttft_target_s: float
    horizon_s: float | None  # the boot path's high percentile; None: not measured yet
    read_at: float | None  # when the readings were taken; None: unknown
    pace: behaviour.Pace = field(default_factory=behaviour.Pace)
    learn: bool = True  # learn capacity from the fleet (False: the prior is the capacity)
    ttft_body_s: float | None = None  # a lower quantile (p95 under a held p99): within it, few requests waited


@dataclass(frozen=True, slots=True)
class MeasureState:
    demand: demand.DemandState = field(default_factory=demand.DemandState)
    minutes: Bins = field(default_factory=lambda: Bins(MINUTE_S, MINUTES_KEPT))
    slots: Bins = field(default_factory=lambda: Bins(SLOT_S, SLOTS_KEPT))
    minute_period: periodicity.PeriodState = field(default_factory=periodicity.PeriodState)
    hour_period: periodicity.PeriodState = field(default_factory=periodicity.PeriodState)
    seasonal: seasonal.SeasonalState = field(default_factory=seasonal.SeasonalState)
    capacity: capacity.CapacityState = field(default_factory=capacity.CapacityState)
    sized: ErrorTrack = field(default_factory=ErrorTrack)  # the error of the forecast sized on (the highest)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sized": self.sized.to_dict(),
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
            ErrorTrack.from_dict(data.get("sized")),
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
        return desired, text, CoreState(now, state.measures, moved)
    assert state.last_t is not None
    measures = dict(state.measures)
    needs: list[Need] = []
    holds: list[behaviour.Hold] = []
    sized = [r for r in inputs.readings if _usable(r)]
    for reading in sized:
        measures[reading.name], need, hold = _measure(inputs, reading, measures.get(reading.name), state.last_t, now)
        needs.append(need)
        if hold is not None:
            holds.append(hold)
    need = max(needs, key=lambda n: n.count)
    hold = max(holds, key=lambda h: h.count, default=None)
    idle = all(r.count == 0 and not r.backlog for r in inputs.readings)
    desired, text, moved = behaviour.move(
        state.behaviour,
        now=now,
        need=need.count,
        current=inputs.current,
        floor=inputs.floor,
        idle=idle,
        hold=hold,
        pace=inputs.pace,
    )
    unsized = [f"{r.name}: {_why_unusable(r)}" for r in inputs.readings if not _usable(r)]
    out = f" [not sized on {'; '.join(unsized)}]" if unsized else ""
    missing = [r.name for r in inputs.readings if r.count is None]
    if missing and desired < inputs.current:  # a measure we cannot read may need what we would release
        desired, text = (
            inputs.current,
            f"{', '.join(missing)} unknown (no scale-in on missing data) → hold {inputs.current}",
        )
    return desired, f"{need.text}{out}; {text}", CoreState(now, measures, moved)


def _usable(reading: Reading) -> bool:
    return reading.count is not None and reading.prior is not None


def _why_unusable(reading: Reading) -> str:
    if reading.count is None:
        return "unknown"
    return reading.prior_how or "no capacity prior"


def _unknown(inputs: CoreInputs, state: CoreState, now: float) -> str:
    """Why this tick cannot size (a sentence), or "" when it can."""
    if inputs.read_at is None or not inputs.readings:
        return "readings unknown"
    if now - inputs.read_at > STALE_S:
        return f"readings stale (taken {dur(now - inputs.read_at)} ago)"
    if all(r.count is None for r in inputs.readings):
        return f"{', '.join(r.name for r in inputs.readings)} unknown"
    if not any(_usable(r) for r in inputs.readings):
        hows = "; ".join(r.prior_how for r in inputs.readings if r.prior_how)
        return f"capacity per instance unknown ({hows or 'no engine model prior'})"
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
        peak=dem.peak,
        ready=inputs.ready,
        ttft=inputs.ttft_s,
        body=inputs.ttft_body_s,
        target=inputs.ttft_target_s,
        waiting=reading.backlog,
    )
    cap = capacity.used(cap_state, reading.prior, inputs.ttft_target_s, learn=inputs.learn)
    if reading.prior_how:
        cap = capacity.Capacity(cap.per_instance, cap.ratio, f"{cap.how}; prior {reading.prior_how}")
    before = m.capacity.waiting
    growing = reading.backlog is not None and reading.backlog > 0 and (before is None or reading.backlog >= before)
    backlog = reading.backlog / DRAIN_S if growing and reading.backlog is not None else 0.0
    forecasts = [trend, by_minute, by_hour, *by_season]
    top, sized = _highest(forecasts, m.sized, now=now, rate=rate, horizon=horizon)
    need = size(
        [top, *(f for f in forecasts if not f.usable)], cap, unit=reading.unit, horizon=horizon, backlog=backlog
    )
    holds = [_hold(p, b.width, now, horizon, cap.per_instance) for p, b in ((minute_p, minutes), (hour_p, slots))]
    hold = max((h for h in holds if h is not None), key=lambda h: h.count, default=None)
    return MeasureState(dem, minutes, slots, minute_p, hour_p, seas, cap_state, sized), need, hold


def _highest(
    forecasts: list[Forecast], errors: ErrorTrack, *, now: float, rate: float, horizon: float
) -> tuple[Forecast, ErrorTrack]:
    """The highest usable forecast, carrying the measured error of "the highest" itself. The forecasters see
    different things (a surge now, a burst due, yesterday's morning) and each misses what another sees: the
    trend misses every cron burst the period forecast predicts. Sizing on the highest with the trend's own
    error would add a burst's worth of headroom to every lull; the error of the highest is what was short."""
    errors = errors.settle(now, rate)
    usable = [f for f in forecasts if f.usable]
    if not usable:
        return Forecast("forecasts", None, None, "none usable yet"), errors
    top = max(usable, key=lambda f: f.value or 0.0)
    assert top.value is not None
    errors = errors.file(now, now + horizon, top.value)
    others = [f.name for f in usable if f is not top]
    note = "; ".join(n for n in (top.note, f"above {', '.join(others)}" if others else "") if n)
    return Forecast(top.name, top.value, errors.quantile(), note), errors


def _hold(
    state: periodicity.PeriodState, width: float, now: float, horizon: float, per_instance: float
) -> behaviour.Hold | None:
    """What a recurring burst due within the horizon needs, at its own error quantile."""
    burst = periodicity.burst_within(state, width, now, horizon)
    if burst is None:
        return None
    err = state.errors.quantile()
    count = ceil_count((burst.peak + (err if err is not None else COLD_HEADROOM * burst.peak)) / per_instance)
    if not burst.burst:  # a lull all the way to the horizon: the period's highest rate within it
        return behaviour.Hold(count, f"the {dur(burst.period_s)} period's rate within {dur(horizon)}")
    due = f"due in {dur(burst.due_in)}" if burst.due_in > 0 else "under way"
    return behaviour.Hold(count, f"a {dur(burst.period_s)} burst is {due}")
