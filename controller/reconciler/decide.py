"""Runs a tier's policy: built-in or external, with its bounds and persisted state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scalectl.policies.boot import boot_time
from scalectl.policies.external import load_external_policy
from scalectl.policies.prior import boot_prior, capacity_prior, compute_prior
from scalectl.policies.spec import ExternalPolicy
from scalectl.policies.types import Bounds, Decision, PolicyInput
from scalectl.tiers.config import TierSpec

DecideFn = Callable[[Any, PolicyInput, Bounds, Any], Decision]


def tier_price_per_hour(tier: TierSpec) -> float | None:
    """$/hour for one instance of the tier at the catalogue price (``TierSpec.catalogue_price_per_hour``)."""
    return tier.catalogue_price_per_hour()


def bounds_for(tier: TierSpec) -> Bounds:
    """The tier's hard limits: min, max and the budget with the price it is measured in."""
    return Bounds(
        min=tier.min,
        max=tier.max,
        budget_per_hour=tier.budget_per_hour,
        price_per_instance_hour=tier_price_per_hour(tier),
    )


class PolicyRunner:
    """Holds what a policy needs between ticks that is not in PolicyState: external policy objects. The
    daemon, the simulator and the backtest all run policies through it."""

    def __init__(self, decide: DecideFn | None = None):
        if decide is None:
            from scalectl.policies.engine import decide as engine_decide

            decide = engine_decide
        self._decide = decide
        self._external: dict[str, tuple[str, Any]] = {}  # tier -> (spec json, policy object)

    def forget(self, name: str) -> None:
        """Drop what is kept for a tier this runner no longer decides for."""
        self._external.pop(name, None)

    def external_for(self, name: str, tier: TierSpec) -> Any:
        """The tier's external policy object (loaded once, again when its spec changes); raises
        ExternalPolicyError when the class cannot be loaded."""
        policy = tier.policy
        if not isinstance(policy, ExternalPolicy):  # narrows the type; the registry knows which kinds are external
            return None
        fingerprint = policy.model_dump_json()
        cached = self._external.get(name)
        if cached is None or cached[0] != fingerprint:
            cached = (fingerprint, load_external_policy(policy.class_, policy.options, bounds_for(tier)))
            self._external[name] = cached
        return cached[1]

    def decide(self, name: str, tier: TierSpec, inp: PolicyInput, bounds: Bounds | None = None) -> Decision:
        if inp.capacity_prior is None:
            inp = replace(inp, capacity_prior=capacity_prior(tier.serving, tier.gpu, tier.gpu_count))
        if inp.compute_prior is None:
            inp = replace(inp, compute_prior=compute_prior(tier.serving, tier.gpu, tier.gpu_count))
        if inp.boot_time is None:  # measured by the policy, else the boot model until boots are measured
            measured = boot_time(inp.state.learned)
            inp = replace(inp, boot_time=measured if measured is not None else boot_prior(tier.serving, tier.gpu_count))
        return self._decide(tier.policy, inp, bounds or bounds_for(tier), self.external_for(name, tier))
