"""What a tier's target tracking has learned, for `scalectl describe tier` and the daemon's /metrics."""

from __future__ import annotations

from typing import Any

from policies import hysteresis
from policies.boot import boot_time
from policies.capacity import estimate, service_time, summary
from policies.prior import capacity_prior, compute_prior
from policies.spec import ReactiveRules
from policies.types import PolicyState
from tiers.config import TierSpec


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
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value)
