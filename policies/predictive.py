"""Predictive policy: pre-scale for known busy windows and for demand seen one period ago.

desired = max(schedule, forecast, reactive):

- schedule: each window covering now (from ``lead_time`` before its start until its end) asks
  ceil(instances × (1 + headroom)).
- forecast: predicted = the peak demand recorded one period ago over [now − period, now − period +
  lead_time + horizon], the highest over the configured periods. Target tracking records load, and asks
  ceil(predicted load ÷ (capacity × target utilisation)) (the utilisation is its headroom); ``mode:
  thresholds`` records instances and asks ceil(predicted × (1 + headroom)).
- reactive: the rules in ``reactive:`` with floor 0 (the tier ``min`` is applied by clamp).

``lead_time`` unset: the tier's measured create→ready time (``PolicyInput.boot_time``), 5 minutes until
a launch has been measured.

With ``mode: thresholds``, while the plan (schedule/forecast) holds the count at or above current, the
reactive scale-in clock is stopped; once the plan drops, the reactive rules take over and scale in after
``scale_in_after`` of low load (and ``cooldown`` since the last change). Target tracking needs no such
coupling: its stabilisation window and the max() do the same.
"""

from __future__ import annotations

from scalectl.policies import min_floor, tracking
from scalectl.policies.common import ceil_count, dur, num
from scalectl.policies.load import UNIT
from scalectl.policies.schedule import active_window
from scalectl.policies.spec import PredictivePolicy
from scalectl.policies.types import Decision, PolicyInput

DEFAULT_LEAD_TIME_S = 300.0


def lead_time_of(spec: PredictivePolicy, boot_time: float | None) -> float:
    """The configured lead time, else the measured boot time, else 5 minutes."""
    if spec.lead_time is not None:
        return spec.lead_time
    return boot_time if boot_time is not None else DEFAULT_LEAD_TIME_S


def _schedule_ask(spec: PredictivePolicy, now: float, lead_time: float) -> tuple[int, str | None]:
    best, text = 0, None
    factor = 1 + spec.headroom
    for window in spec.schedule:
        hit = active_window(window, now, lead_time)
        if hit is None:
            continue
        ask = ceil_count(window.instances * factor)
        if text is None or ask > best:
            when = f"{hit.local_start:%a %H:%M}–{window.until} {window.timezone}"
            if now < hit.start:
                when += f", starts in {dur(hit.start - now)}"
            best, text = ask, f'schedule "{window.cron}" ({when}): {window.instances} × {factor:g} = {ask}'
    return best, text


def _forecast_ask(spec: PredictivePolicy, inp: PolicyInput) -> tuple[int, str | None]:
    if spec.forecast is None:
        return 0, None
    seen = [(inp.history.by_period[p], p) for p in spec.forecast.periods if p in inp.history.by_period]
    if not seen:
        return 0, "forecast: no demand recorded one period ago yet"
    predicted, period = max(seen)
    factor = 1 + spec.headroom
    ask = ceil_count(predicted * factor)
    return ask, f"forecast: peak {num(predicted)} {dur(period)} ago × {factor:g} = {ask}"


def _load_forecast_ask(spec: PredictivePolicy, inp: PolicyInput, reactive: Decision) -> tuple[int, str | None]:
    if spec.forecast is None:
        return 0, None
    seen = [(inp.history.by_period[p], p) for p in spec.forecast.periods if p in inp.history.by_period]
    if not seen:
        return 0, "forecast: no load recorded one period ago yet"
    cap = tracking.capacity_for(spec.reactive, inp, reactive.state)
    if cap is None:
        return 0, "forecast: capacity per instance unknown"
    predicted, period = max(seen)
    utilisation = spec.reactive.target_utilization
    ask = ceil_count(predicted / (cap.per_instance * utilisation))
    per = num(round(cap.per_instance, 1))
    basis = f"{num(round(predicted, 1))} {UNIT} {dur(period)} ago ÷ ({per} × {utilisation:g})"
    return ask, f"forecast: {basis} = {ask}"


def _decide_tracking(spec: PredictivePolicy, inp: PolicyInput, lead: float) -> Decision:
    scheduled, schedule_text = _schedule_ask(spec, inp.now, lead)
    reactive = tracking.evaluate(spec.reactive, 0, inp)
    forecast, forecast_text = _load_forecast_ask(spec, inp, reactive)
    plan = max(scheduled, forecast)
    plan_texts = [t for t in (schedule_text, forecast_text) if t] or ["no schedule window or forecast now"]
    desired = max(plan, reactive.desired)
    basis = reactive.reason.rsplit(" → ", 1)[0]
    reason = f"{'; '.join(plan_texts)}; reactive {reactive.desired}: {basis} → {desired}"
    return Decision(desired, reason, reactive.state, reactive.demand)


def decide(spec: PredictivePolicy, inp: PolicyInput) -> Decision:
    lead = lead_time_of(spec, inp.boot_time)
    if spec.reactive.mode == "target":
        return _decide_tracking(spec, inp, lead)
    scheduled, schedule_text = _schedule_ask(spec, inp.now, lead)
    forecast, forecast_text = _forecast_ask(spec, inp)
    plan = max(scheduled, forecast)
    plan_texts = [t for t in (schedule_text, forecast_text) if t]
    holding = plan > 0 and plan >= inp.current
    reactive = min_floor.evaluate(spec.reactive, 0, inp, scale_in_blocked_by="; ".join(plan_texts) if holding else None)
    desired = max(plan, reactive.desired)
    if not plan_texts:
        plan_texts.append("no schedule window or forecast now")
    basis = reactive.reason.rsplit(" → ", 1)[0]
    reason = f"{'; '.join(plan_texts)}; reactive {reactive.desired}: {basis} → {desired}"
    return Decision(desired, reason, reactive.state, reactive.demand)
