"""The offers the reconciler places on: fetched per (provider, GPU) when the cache's TTL ran out, and
read from the cache, however old, when planning (stale offers beat none: a provider whose offers call
fails this tick can still take creates)."""

from __future__ import annotations

from collections.abc import Mapping

from scalectl.clocks import Clock
from scalectl.controller.offers import OfferCache
from scalectl.controller.reconciler.calls import Calls, one_line
from scalectl.providers.base import GpuRequest, Offer, Provider
from scalectl.tiers.config import TierSpec


class TierOffers:
    def __init__(self, providers: Mapping[str, Provider], calls: Calls, clock: Clock, ttl: float):
        self._providers = providers
        self._calls = calls
        self.cache = OfferCache(clock, ttl=ttl)

    def of(self, tier: TierSpec) -> list[Offer]:
        """The last good offers of the tier's providers."""
        offers: list[Offer] = []
        for name in tier.providers:
            for gpu, count in _hardware(tier):
                offers.extend(self.cache.peek(name, gpu, count) or [])
        return offers

    async def refresh(self, tiers: Mapping[str, TierSpec]) -> dict[str, str]:
        """Fetch what the tiers use; returns provider → error for the calls that failed."""
        wanted = sorted(
            {(p, g, c) for t in tiers.values() for g, c in _hardware(t) for p in t.providers if p in self._providers}
        )
        wanted = [w for w in wanted if self.cache.stale(*w)]  # most ticks: none (no task to schedule for nothing)
        if not wanted:
            return {}
        results = await self._calls.gather(
            self.cache.get(self._providers[p], GpuRequest(gpu=g, count=c)) for p, g, c in wanted
        )
        return {want[0]: one_line(r) for want, r in zip(wanted, results, strict=True) if isinstance(r, BaseException)}


def _hardware(tier: TierSpec) -> tuple[tuple[str, int], ...]:
    """The (GPU, count) pairs whose offers a tier places on: its own, and its variants'."""
    return tier.hardware if tier.variants else ((tier.gpu, tier.gpu_count),)
