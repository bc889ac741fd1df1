"""What a tier's policy has learned, for `scalectl describe tier` and the daemon's /metrics: target mode's
capacity per instance per measure, or a batch tier's task time, slots and rounds (``max_wait``)."""

from __future__ import annotations

from typing import Any

from scalectl.policies import batch
from scalectl.policies.boot import boot_time, samples
from scalectl.policies.core.capacity import used
from scalectl.policies.core.pipeline import MeasureState
from scalectl.policies.prior import capacity_prior, compute_prior
from scalectl.policies.spec import ReactiveRules, ScaleToZeroPolicy
from scalectl.policies.target import learns, service_time
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import TierSpec

UNITS = {"requests": "req/s", "tokens": "tokens/s", "in flight": "in flight"}


def tracking_rules(tier: TierSpec) -> ReactiveRules | None:
    """The decision core's settings of a tier's policy (min-floor, or predictive's reactive part), else None."""
    rules = getattr(tier.policy, "reactive", tier.policy)
    return rules if isinstance(rules, ReactiveRules) else None


def learned_capacity(tier: TierSpec, state: PolicyState) -> dict[str, Any] | None:
    """What target mode (the decision core) sizes on, per measure: capacity per instance (prior, learned,
    clamped, and why), the error of the forecast it sizes on; then service and boot times and the settings
    that shape scale-in. None without target mode."""
    rules = tracking_rules(tier)
    if rules is None:
        return None
    prior = rules.capacity if rules.capacity is not None else capacity_prior(tier.serving, tier.gpu, tier.gpu_count)
    measures = {name: _measure(name, m, rules) for name, m in (state.core.measures if state.core else {}).items()}
    sized = {k: v for k, v in measures.items() if v is not None}
    first = next(iter(sized.values()), None)
    return {
        # the first measure's figure (requests, or tasks in flight), as the metric shows it; None until sized
        "capacity_per_instance": None if first is None else first["per_instance"],
        "capacity_prior_per_instance": None if first is None else first["prior"],
        "unit": None if first is None else first["unit"],
        "in_flight_prior": round(prior, 2),  # requests in flight one instance carries (KV math or `capacity`)
        "measures": sized,
        # the second limit: tokens per second one instance computes (the engine model), None if unsized
        "compute_tokens_per_second_per_instance": _rounded(compute_prior(tier.serving, tier.gpu, tier.gpu_count)),
        "service_time_s": service_time(state.learned),
        "boot_time_s": boot_time(state.learned),
        "stabilization_s": rules.stabilization,
        "ttft_target_s": rules.ttft_target,
        "ttft_quantile": rules.ttft_quantile,  # the TTFT quantile held within the target
    }


def _measure(name: str, m: MeasureState, rules: ReactiveRules) -> dict[str, Any] | None:
    prior = m.capacity.prior
    if prior is None:
        return None
    cap = used(m.capacity, prior, rules.ttft_target, learn=learns(rules))
    err, last = m.sized.quantile(), m.sized.last
    return {
        # the sized forecast (the highest) for the horizon ahead, and the latest one that came due with what came
        "forecast_ahead": _r3(m.sized.ahead),
        "forecast_due": None if last is None else _r3(last[0]),
        "actual_due": None if last is None else _r3(last[1]),
        "unit": UNITS.get(name, name),
        "per_instance": round(cap.per_instance, 3),
        "prior": round(prior, 3),
        "ratio_to_prior": round(cap.ratio, 3),
        "why": cap.how,
        "forecast_error_p90": None if err is None else round(err, 3),
    }


def _r3(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value)


def learned_batch(tier: TierSpec, state: PolicyState) -> dict[str, Any] | None:
    """A ``max_wait`` batch tier's learned figures and whether it serves a trickle in rounds; None for other
    tiers. Unknown figures are None (the policy sizes by ``queue_per_instance`` until they are learned)."""
    policy = tier.policy
    if not isinstance(policy, ScaleToZeroPolicy) or policy.max_wait is None:
        return None
    learned = state.learned
    task, shown, floor = batch.task_time(learned), batch.slots(learned), batch.least_slots(learned)
    slots = shown or floor
    boots = samples(learned)
    saving = batch.round_saving(policy.max_wait, task, slots, boots)
    return {
        "max_wait_s": policy.max_wait,
        "task_time_s": None if task is None else round(task, 1),
        "slots_per_instance": shown,
        # the most tasks one instance was seen running: stands in for the slots until a backlog shows them
        "slots_at_least": floor,
        "tasks_per_minute_per_instance": None if not (task and slots) else round(slots / task * 60, 2),
        "boot_time_s": boot_time(learned),
        "boots_measured": len(boots),
        "round_saving": round(saving, 3),
        "rounds": saving >= batch.MIN_ROUND_SAVING,  # a trickle served in rounds (policies/batch.py)
    }
