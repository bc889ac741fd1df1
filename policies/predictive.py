"""Predictive policy: pre-scale for known busy windows.

desired = max(schedule, reactive):

- schedule: each window covering now (from ``lead_time`` before its start until its end) asks
  ceil(instances × (1 + headroom)). A window opened ahead of its start stays open until it starts.
- reactive: the decision core (policies/target.py) with floor 0 (the tier ``min`` is applied by clamp). It
  forecasts the tier's own daily and weekly seasons and recurring periods from its history; its
  stabilisation window and the max() scale in once a window ends.

``lead_time`` unset: the tier's measured create→ready time (``PolicyInput.boot_time``), 5 minutes until
a launch has been measured.
"""

from __future__ import annotations

from dataclasses import replace

from scalectl.policies import target as target_mode
from scalectl.policies.common import ceil_count, dur
from scalectl.policies.core.constants import DEFAULT_HORIZON_S
from scalectl.policies.schedule import active_window
from scalectl.policies.spec import PredictivePolicy
from scalectl.policies.types import Decision, PolicyInput


def lead_time_of(spec: PredictivePolicy, boot_time: float | None) -> float:
    """The configured lead time, else the measured boot time, else 5 minutes."""
    if spec.lead_time is not None:
        return spec.lead_time
    return boot_time if boot_time is not None else DEFAULT_HORIZON_S


OPENED = "schedule.opened"  # the start of the latest window the plan opened ahead of


def _schedule_ask(spec: PredictivePolicy, inp: PolicyInput, lead_time: float) -> tuple[int, str | None, float | None]:
    """What the schedule windows covering now ask, and the start of the one opened ahead of time (kept in
    the state): a window once opened stays open until it starts, whatever the lead becomes meanwhile. A
    faster boot measured in between would otherwise close it again and retire what it started."""
    now = inp.now
    opened = inp.state.learned.get(OPENED)
    if opened is not None and opened > now:
        lead_time = max(lead_time, opened - now)
    best, text, start = 0, None, None
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
            start = hit.start if now < hit.start else None
    return best, text, start


def _with_opened(decision: Decision, start: float | None) -> Decision:
    learned = {k: v for k, v in decision.state.learned.items() if k != OPENED}
    if start is not None:
        learned[OPENED] = start
    return replace(decision, state=replace(decision.state, learned=learned))


def decide(spec: PredictivePolicy, inp: PolicyInput) -> Decision:
    """The schedule beside the decision core, which forecasts the tier's own seasons and periods."""
    plan, schedule_text, opened = _schedule_ask(spec, inp, lead_time_of(spec, inp.boot_time))
    reactive = target_mode.evaluate(spec.reactive, 0, inp)
    desired = max(plan, reactive.desired)
    basis = reactive.reason.rsplit(" → ", 1)[0]
    reason = f"{schedule_text or 'no schedule window now'}; reactive {reactive.desired}: {basis} → {desired}"
    return _with_opened(Decision(desired, reason, reactive.state, reactive.demand), opened)
