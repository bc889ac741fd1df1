"""The operator's controls on a tier's desired count, applied after its policy decided: an override
(`scalectl scale TIER N`) replaces the count, clamped to the tier's max and budget but not raised to its
min (an explicit wish: scaling a tier to zero for maintenance is one); a pause (`scalectl pause TIER`) holds
the count the tier had. The policy still runs and its answer stays in the reason, and failed or interrupted
instances are still replaced: both act on the desired count only."""

from __future__ import annotations

from dataclasses import replace

from scalectl.controller.reconciler.decide import bounds_for
from scalectl.controller.reconciler.decision import DecidePhase, TierDecision
from scalectl.controller.reconciler.tick import Tick
from scalectl.controller.store.repository import Store
from scalectl.domain.tier_control import TierControl
from scalectl.policies.clamp import clamp
from scalectl.tiers.config import TierSpec


class Controls:
    def __init__(self, store: Store, decide: DecidePhase):
        self.store = store
        self.decide = decide
        self._controls: dict[str, TierControl] = {}

    def refresh(self) -> None:
        """Read what the operator set (once a tick, before the tiers are decided)."""
        self._controls = self.store.controls.controls()

    def apply(self, tick: Tick, name: str, tier: TierSpec, decision: TierDecision, price: float | None) -> TierDecision:
        """The decision with the tier's controls applied; as it was when there are none."""
        control = self._controls.get(name)
        if control is None:
            return decision
        policy = f"policy: {decision.desired} ({decision.reason})"
        override = control.override_at(tick.now)
        if override is not None:
            bounds = replace(bounds_for(tier), min=0, price_per_instance_hour=price)
            count, notes = clamp(override, bounds)
            if override < tier.min:
                notes.append(f"below tier min {tier.min}: an override is the operator's wish")
            reason = "; ".join([f"{control.describe_override()} (scalectl scale)", *notes, policy])
            return self.decide.pin(tick, name, decision, count, reason)
        if control.paused:
            held = self.decide.last_desired(name, decision.current)
            return self.decide.pin(tick, name, decision, held, f"paused at {held} (scalectl pause); {policy}")
        return decision
