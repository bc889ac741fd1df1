"""Runs a tier's policy: built-in or external, with its bounds, history and persisted state."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from scalectl.policies.boot import boot_time
from scalectl.policies.external import load_external_policy
from scalectl.policies.history import DemandHistory
from scalectl.policies.predictive import lead_time_of
from scalectl.policies.prior import boot_prior, capacity_prior, compute_prior
from scalectl.policies.registry import forecast_of
from scalectl.policies.spec import ExternalPolicy
from scalectl.policies.types import Bounds, Decision, PolicyInput, SeasonalHistory
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
    """Holds what a policy needs between ticks that is not in PolicyState: external policy objects and,
    for tiers with a seasonal forecast, their demand history (kept as far back as the forecast reaches).
    The daemon, the simulator and the backtest all run policies through it."""

    def __init__(self, decide: DecideFn | None = None):
        if decide is None:
            from scalectl.policies.engine import decide as engine_decide

            decide = engine_decide
        self._decide = decide
        self._external: dict[str, tuple[str, Any]] = {}  # tier -> (spec json, policy object)
        self._history: dict[str, DemandHistory] = {}

    def history_for(self, name: str, tier: TierSpec) -> DemandHistory | None:
        """The tier's demand history, or None when its policy forecasts nothing (nothing is kept)."""
        forecast = forecast_of(tier.policy)
        if forecast is None:
            return None
        needed = DemandHistory.for_forecast(forecast, _longest_lead(tier))
        hist = self._history.get(name)
        if hist is None or hist.retention < needed.retention:  # a longer forecast: a longer memory
            if hist is not None:
                needed.extend(hist.entries())
            hist = self._history[name] = needed
        return hist

    def forget(self, name: str) -> None:
        """Drop what is kept for a tier this runner no longer decides for."""
        self._history.pop(name, None)
        self._external.pop(name, None)

    @staticmethod
    def history_reach(tiers: Mapping[str, TierSpec]) -> float:
        """How far back the tiers' forecasts look (seconds): what to load from the store at start."""
        reach = [
            DemandHistory.for_forecast(forecast, _longest_lead(t)).retention
            for t in tiers.values()
            if (forecast := forecast_of(t.policy)) is not None
        ]
        return max(reach, default=0.0)

    def seed_history(self, samples: Iterable[tuple[str, float, float]], tiers: Mapping[str, TierSpec]) -> None:
        for name, t, demand in samples:
            tier = tiers.get(name)
            hist = self.history_for(name, tier) if tier is not None else None
            if hist is not None:
                hist.append(t, demand)

    def seasonal(
        self, name: str, tier: TierSpec, now: float, learned: Mapping[str, float] | None = None
    ) -> SeasonalHistory:
        """Recorded demand one period ago; ``learned`` (the policy state's) supplies a measured lead time."""
        hist = self.history_for(name, tier)
        forecast = forecast_of(tier.policy)
        if hist is None or forecast is None:
            return SeasonalHistory()
        lead = lead_time_of(tier.policy, boot_time(learned or {}))  # type: ignore[arg-type]  # it forecasts
        return hist.seasonal(now, forecast.periods, lead, forecast.horizon)

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
        if forecast_of(tier.policy) is not None and inp.boot_time is None:
            # the forecast window must match the lead time the policy acts on (measured, in its state)
            inp = replace(inp, history=self.seasonal(name, tier, inp.now, inp.state.learned))
        if inp.boot_time is None:  # measured by the policy, else the boot model until boots are measured
            measured = boot_time(inp.state.learned)
            inp = replace(inp, boot_time=measured if measured is not None else boot_prior(tier.serving, tier.gpu_count))
        decision = self._decide(tier.policy, inp, bounds or bounds_for(tier), self.external_for(name, tier))
        hist = self.history_for(name, tier)
        if hist is not None:
            hist.append(inp.now, decision.demand)  # unknown demand is a gap, never a zero
        return decision


def _longest_lead(tier: TierSpec) -> float:
    """The lead time a forecast's history must cover: the configured one, else up to an hour of boot."""
    configured = getattr(tier.policy, "lead_time", None)
    return configured if configured is not None else MAX_MEASURED_LEAD_S


MAX_MEASURED_LEAD_S = 3600.0
