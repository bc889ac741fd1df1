"""What a tier's policy has learned, for `scalectl describe tier` and the daemon's /metrics: target tracking's
capacity per instance, or a batch tier's task time, slots and rounds (``max_wait``)."""

from __future__ import annotations

from typing import Any

from scalectl.policies import batch, hysteresis
from scalectl.policies.boot import boot_time, samples
from scalectl.policies.capacity import SMALL_FLEET, estimate, service_time, small_fleet_capacity, summary
from scalectl.policies.prior import capacity_prior, compute_prior
from scalectl.policies.spec import ReactiveRules, ScaleToZeroPolicy
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import TierSpec


def tracking_rules(tier: TierSpec) -> ReactiveRules | None:
    """The target-tracking rules of a tier's policy (min-floor, or predictive's reactive part), else None."""
    policy = tier.policy
    rules = getattr(policy, "reactive", policy)
    if isinstance(rules, ReactiveRules) and rules.mode == "target":
        return rules
    return None


def learned_capacity(tier: TierSpec, state: PolicyState) -> dict[str, Any] | None:
    """Capacity per instance (prior, learned, clamped), service and boot times, the scale-in window; None
    without target tracking."""
    rules = tracking_rules(tier)
    if rules is None:
        return None
    prior = rules.capacity if rules.capacity is not None else capacity_prior(tier.serving, tier.gpu, tier.gpu_count)
    cap = estimate(state.learned, prior, learn=rules.learn_capacity)
    svc = service_time(state.learned)
    return {
        "capacity_per_instance": round(cap.per_instance, 2),
        "unit": "requests in flight",
        "prior": round(prior, 2),
        "learned": None if cap.learned is None else round(cap.learned, 2),
        "requests_per_second_per_instance": None if not svc else round(cap.per_instance / svc, 2),
        # the second limit: tokens per second one instance computes (the engine model), None if unsized
        "compute_tokens_per_second_per_instance": _rounded(compute_prior(tier.serving, tier.gpu, tier.gpu_count)),
        "service_time_s": svc,
        "boot_time_s": boot_time(state.learned),
        "target_utilization": rules.target_utilization,
        # the scale-in window now: the configured one, widened while scale-ins were undone (policies/hysteresis.py)
        "stabilization_s": hysteresis.window(rules, state.learned),
        "stabilization_configured_s": rules.stabilization,
        "ttft_target_s": rules.ttft_target,
        "ttft_quantile": rules.ttft_quantile,  # the TTFT quantile held within the target
        "why": cap.text,
        "observations": [{"load_per_instance": x, "breached_share": b} for x, b in summary(state.learned)],
        # fleets of up to SMALL_FLEET keep their own bins: the load per instance each size breached at, if seen
        "small_fleets": [
            {"ready": size, "breached_from": round(found, 2)}
            for size in range(1, SMALL_FLEET + 1)
            if (found := small_fleet_capacity(state.learned, prior, size)) is not None
        ],
    }


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
