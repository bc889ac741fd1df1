"""Which offer a new instance goes to: cheapest acceptable, skipping offers that just ran out (Karpenter's
3-minute unavailable-offerings cache), spot first for spot tiers, on-demand when spot is gone and the tier
allows fallback; never over the tier's $/hour budget.

A tier with ``variants`` ranks every (variant, offer) pair on one scale, dollars per *primary unit* (an
instance's price divided by what it is worth in instances of the tier's own GPU, ``TierSpec.capacity_units``):
the cheapest capacity per dollar wins whatever GPU it is on, and an offer that answers no-capacity hands
the next create to the next pair, on another variant if that is next. Without variants every instance is
one unit and the order is by price, as before."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scalectl.controller.offers import cache_key
from scalectl.providers.base import Capacity, Offer
from scalectl.tiers.config import TierSpec

UNAVAILABLE_FOR = 180.0  # seconds an offer is skipped after a no-capacity answer
PROVIDER_UNAVAILABLE_FOR = 600.0  # seconds a provider is skipped after a quota or credentials refusal


@dataclass
class UnavailableOffers:
    """Offers that answered no-capacity recently, and providers that refused us (quota, credentials),
    with when they may be tried again."""

    until: dict[tuple[str, str, Capacity], float] = field(default_factory=dict)
    providers: dict[str, float] = field(default_factory=dict)

    def mark(self, offer: Offer, capacity: Capacity, now: float, seconds: float = UNAVAILABLE_FOR) -> None:
        self.mark_id(offer.provider, offer.offer_id, capacity, now, seconds)

    def mark_id(
        self, provider: str, offer_id: str, capacity: Capacity, now: float, seconds: float = UNAVAILABLE_FOR
    ) -> None:
        self.until[(provider, offer_id, capacity)] = now + seconds

    def mark_provider(self, provider: str, now: float, seconds: float = PROVIDER_UNAVAILABLE_FOR) -> None:
        self.providers[provider] = now + seconds

    def is_unavailable(self, offer: Offer, capacity: Capacity, now: float) -> bool:
        return _expired_or_set(self.providers, offer.provider, now) or _expired_or_set(
            self.until, (offer.provider, offer.offer_id, capacity), now
        )


def _expired_or_set(marks: dict[Any, float], key: Any, now: float) -> bool:
    """Whether ``key`` is marked until a time still ahead; an expired mark is dropped."""
    t = marks.get(key)
    if t is None:
        return False
    if now >= t:
        del marks[key]
        return False
    return True


@dataclass(frozen=True)
class Placement:
    offer: Offer
    capacity: Capacity
    price_per_hour: float
    fallback: bool  # on-demand standing in for spot
    units: float = 1.0  # what the instance is worth in instances of the tier's own GPU (variants)

    @property
    def per_unit(self) -> float:
        """Dollars per hour per primary unit: what placement ranks by."""
        return self.price_per_hour / self.units


def capacities_for(tier: TierSpec, spot_backoff: bool) -> list[tuple[Capacity, bool]]:
    """Capacity kinds to try, in order, each with whether it is a fallback."""
    if tier.capacity == "on-demand":
        return [(Capacity.ON_DEMAND, False)]
    order = [(Capacity.SPOT, False)]
    if tier.fallback == "on-demand":
        order.append((Capacity.ON_DEMAND, True))
        if spot_backoff:  # spot was interrupted repeatedly: prefer on-demand until the back-off ends
            order.reverse()
    return order


def ranked_offers(
    tier: TierSpec,
    offers: Iterable[Offer],
    unavailable: UnavailableOffers,
    now: float,
    *,
    spot_backoff: bool = False,
) -> list[Placement]:
    """Every acceptable placement, best first. On-demand tiers: by price, then provider order. Spot tiers
    with an on-demand fallback: by price across both kinds, spot first at equal price (on-demand that
    costs less than spot — as A100 80G PCIe does in the seed prices — is simply the better buy); while
    spot is in back-off after repeated interruptions, on-demand first."""
    provider_rank = {name: i for i, name in enumerate(tier.providers)}
    offers = [o for o in offers if o.provider in provider_rank and _serves(tier, o)]
    if tier.regions:
        offers = [o for o in offers if o.region in tier.regions]
    ranked: list[Placement] = []
    for capacity, is_fallback in capacities_for(tier, spot_backoff):
        candidates = []
        for offer in offers:
            price = offer.price(capacity)
            if price is None or not offer.available or unavailable.is_unavailable(offer, capacity, now):
                continue
            units = tier.capacity_units(offer.gpu, offer.gpu_count)
            candidates.append(Placement(offer, capacity, price, is_fallback, units))
        candidates.sort(key=lambda p: (p.per_unit, provider_rank[p.offer.provider], p.offer.offer_id))
        ranked.extend(candidates)
    if tier.fallback == "on-demand" and not spot_backoff:  # one market: the cheapest capacity wins
        ranked.sort(key=lambda p: (p.per_unit, p.capacity is not Capacity.SPOT))
    return ranked


def _serves(tier: TierSpec, offer: Offer) -> bool:
    """Whether the offer is hardware the tier runs on: its own GPU count (offers are fetched per GPU) or,
    for a tier with variants, one of its (GPU, count) pairs."""
    if not tier.variants:
        return offer.gpu_count == tier.gpu_count
    return (cache_key(offer.provider, offer.gpu, offer.gpu_count)[1], offer.gpu_count) in tier.hardware


def choose(
    ranked: Sequence[Placement], spend_per_hour: float, budget_per_hour: float | None, in_use: Mapping[str, int]
) -> Placement | None:
    """The first placement that fits the budget and still has room (``in_use`` counts planned launches)."""
    for placement in ranked:
        if budget_per_hour is not None and spend_per_hour + placement.price_per_hour > budget_per_hour + 1e-9:
            continue
        room = placement.offer.available_count
        if room is not None and in_use.get(placement.offer.offer_id, 0) >= room:
            continue
        return placement
    return None
