"""The fleet-wide $/hour cap (the tiers file's top-level ``budget_per_hour``) within one tick.

Who gets capacity when it binds: every tier's unmet floor (``min``) is reserved first, at the catalogue
price; then tiers are planned in order, user-facing (a latency target) before batch, then by name, each
taking what is left. What the fleet bills now (draining included) and each planned create count."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FleetBudget:
    cap: float | None  # None: no fleet budget
    spend: float  # $/hour of everything that bills now, then of each planned create
    reserved: dict[str, float] = field(default_factory=dict)  # tier -> $/hour of its unmet floor

    def budget_for(self, tier: str, tier_budget: float | None, tier_spend: float) -> float | None:
        """The budget placement may use for one tier: its own cap, and no more than what the tier already
        bills plus what the fleet has left once the other tiers' floors are set aside."""
        if self.cap is None:
            return tier_budget
        others = sum(v for name, v in self.reserved.items() if name != tier)
        fleet = tier_spend + max(0.0, self.cap - self.spend - others)
        return fleet if tier_budget is None else min(tier_budget, fleet)

    def binds(self, tier: str, tier_budget: float | None, tier_spend: float) -> bool:
        """The fleet's cap, not the tier's own, is what stops the next instance."""
        budget = self.budget_for(tier, tier_budget, tier_spend)
        return self.cap is not None and budget is not None and (tier_budget is None or budget < tier_budget)

    def add(self, price_per_hour: float) -> None:
        self.spend += price_per_hour

    def planned(self, tier: str) -> None:
        """The tier is planned: its floor's reservation gives way to what it actually placed."""
        self.reserved.pop(tier, None)

    def describe(self) -> str:
        held = sum(self.reserved.values())
        floors = f", ${held:.2f}/h held for other tiers' floors" if held else ""
        return f"the fleet budget ${self.cap:g}/h is reached (${self.spend:.2f}/h billed or planned{floors})"
