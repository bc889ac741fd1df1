"""Runs a tier's policy: built-in or external, with its bounds, history and persisted state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.config import TierSpec
from policies.spec import ExternalPolicy, PredictivePolicy
from policies.types import Bounds, Decision, PolicyInput, SeasonalHistory
from sizing.gpus import UnknownGpu, gpu_info

DecideFn = Callable[[Any, PolicyInput, Bounds, Any], Decision]


def tier_price_per_hour(tier: TierSpec) -> float | None:
    """$/hour for one instance of the tier at the catalogue price × gpu_count (the spot price for spot
    tiers when the catalogue has one); None for a GPU the catalogue does not know."""
    try:
        info = gpu_info(tier.gpu)
    except UnknownGpu:
        return None
    spot = info.spot_per_hour if tier.capacity == "spot" else None
    return (spot if spot is not None else info.on_demand_per_hour) * tier.gpu_count


def bounds_for(tier: TierSpec) -> Bounds:
    """The tier's hard limits: min, max and the budget with the price it is measured in."""
    return Bounds(
        min=tier.min,
        max=tier.max,
        budget_per_hour=tier.budget_per_hour,
        price_per_instance_hour=tier_price_per_hour(tier),
    )


class PolicyRunner:
    """Holds what a policy needs between ticks that is not in PolicyState: external policy objects and
    the demand history for seasonal forecasts."""

    def __init__(self, decide: DecideFn | None = None):
        if decide is None:
            from policies.engine import decide as engine_decide

            decide = engine_decide
        self._decide = decide
        self._external: dict[str, tuple[str, Any]] = {}  # tier -> (spec json, policy object)
        self._history: dict[str, Any] = {}

    def history_for(self, tier: str) -> Any:
        from policies.history import DemandHistory

        hist = self._history.get(tier)
        if hist is None:  # a week and a day: enough for the longest default seasonal period
            hist = self._history[tier] = DemandHistory(retention=8 * 86400.0)
        return hist

    def seed_history(self, samples: list[tuple[str, float, float]]) -> None:
        for tier, t, demand in samples:
            self.history_for(tier).append(t, demand)

    def seasonal(self, name: str, tier: TierSpec, now: float) -> SeasonalHistory:
        policy = tier.policy
        if not isinstance(policy, PredictivePolicy) or policy.forecast is None:
            return SeasonalHistory()
        seasonal: SeasonalHistory = self.history_for(name).seasonal(
            now, policy.forecast.periods, policy.lead_time, policy.forecast.horizon
        )
        return seasonal

    def external_for(self, name: str, tier: TierSpec) -> Any:
        policy = tier.policy
        if not isinstance(policy, ExternalPolicy):
            return None
        fingerprint = policy.model_dump_json()
        cached = self._external.get(name)
        if cached is None or cached[0] != fingerprint:
            from policies.external import load_external_policy

            cached = (fingerprint, load_external_policy(policy.class_, policy.options, bounds_for(tier)))
            self._external[name] = cached
        return cached[1]

    def decide(self, name: str, tier: TierSpec, inp: PolicyInput) -> Decision:
        decision = self._decide(tier.policy, inp, bounds_for(tier), self.external_for(name, tier))
        if decision.demand is not None:
            self.history_for(name).append(inp.now, decision.demand)
        return decision
