"""Placement: the cheapest acceptable offer, spot and on-demand in one market when a fallback is allowed."""

from __future__ import annotations

from scalectl.controller.reconciler.placement import UnavailableOffers, ranked_offers
from scalectl.providers.base import Capacity, Offer
from scalectl.tiers.config import TierSpec
from tests.builders import tier_spec


def _tier(gpu: str) -> TierSpec:
    return tier_spec(gpu, capacity="spot", fallback="on-demand")


def _offers(gpu: str, on_demand: float, spot: float) -> list[Offer]:
    return [
        Offer("simulated", f"{gpu}/od", gpu, 1, "r", on_demand, None),
        Offer("simulated", f"{gpu}/spot", gpu, 1, "r", None, spot),
    ]


def test_spot_first_when_it_is_cheaper() -> None:
    ranked = ranked_offers(_tier("H100-SXM5-80GB"), _offers("H100-SXM5-80GB", 2.40, 0.99), UnavailableOffers(), 0.0)
    assert [p.capacity for p in ranked] == [Capacity.SPOT, Capacity.ON_DEMAND]


def test_on_demand_first_when_spot_costs_more() -> None:
    ranked = ranked_offers(_tier("A100-80GB-PCIe"), _offers("A100-80GB-PCIe", 1.04, 1.14), UnavailableOffers(), 0.0)
    assert [(p.capacity, p.price_per_hour) for p in ranked] == [(Capacity.ON_DEMAND, 1.04), (Capacity.SPOT, 1.14)]


def test_spot_wins_a_tie_and_back_off_puts_on_demand_first() -> None:
    tier = _tier("H100-SXM5-80GB")
    tie = ranked_offers(tier, _offers("H100-SXM5-80GB", 1.0, 1.0), UnavailableOffers(), 0.0)
    assert tie[0].capacity is Capacity.SPOT
    backed_off = ranked_offers(tier, _offers("H100-SXM5-80GB", 2.40, 0.99), UnavailableOffers(), 0.0, spot_backoff=True)
    assert backed_off[0].capacity is Capacity.ON_DEMAND
