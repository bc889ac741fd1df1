"""OfferCache: one provider call per (provider, GPU, count) per TTL, on the fake clock."""

from __future__ import annotations

import asyncio

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.offers import OfferCache
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec, Offer, ProviderInstance
from scalectl.providers.errors import Transient


class CountingProvider:
    """Sells one on-demand and one spot offer per region; counts calls; can fail or be held."""

    def __init__(self, name: str = "acme", regions: tuple[str, ...] = ("east", "west")) -> None:
        self.name = name
        self.regions = regions
        self.requests: list[GpuRequest] = []
        self.fail_next = 0
        self.gate: asyncio.Event | None = None

    async def offers(self, want: GpuRequest) -> list[Offer]:
        self.requests.append(want)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise Transient("HTTP 503", provider=self.name)
        out = []
        for region in self.regions:
            out.append(Offer(self.name, f"od-{region}", want.gpu, want.count, region, 2.0 * want.count, None))
            out.append(Offer(self.name, f"spot-{region}", want.gpu, want.count, region, None, 1.0 * want.count))
        return out

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        raise NotImplementedError

    async def get(self, provider_id: str) -> ProviderInstance:
        raise NotImplementedError

    async def list(self, key_prefix: str) -> list[ProviderInstance]:
        return []

    async def delete(self, provider_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_one_call_per_key_within_the_ttl_and_a_new_one_after(clock: FakeClock) -> None:
    provider, cache = CountingProvider(), OfferCache(clock, ttl=60)
    first = await cache.get(provider, GpuRequest("H100-SXM5-80GB"))
    clock.advance(59)
    assert await cache.get(provider, GpuRequest("H100-SXM5-80GB")) == first
    assert len(provider.requests) == 1
    clock.advance(1)
    await cache.get(provider, GpuRequest("H100-SXM5-80GB"))
    assert len(provider.requests) == 2


async def test_keys_are_provider_gpu_and_count_with_gpu_spellings_shared(clock: FakeClock) -> None:
    provider, other = CountingProvider(), CountingProvider("other")
    cache = OfferCache(clock)
    await cache.get(provider, GpuRequest("H100"))
    await cache.get(provider, GpuRequest("H100-SXM5-80GB"))  # the same GPU, spelled canonically
    assert len(provider.requests) == 1
    two = await cache.get(provider, GpuRequest("H100", count=2))
    assert len(provider.requests) == 2 and {o.gpu_count for o in two} == {2}
    await cache.get(other, GpuRequest("H100"))
    assert len(other.requests) == 1


async def test_one_broad_fetch_serves_capacity_and_region_questions(clock: FakeClock) -> None:
    provider, cache = CountingProvider(), OfferCache(clock)
    spot = await cache.get(provider, GpuRequest("L40S", capacity=Capacity.SPOT))
    on_demand = await cache.get(provider, GpuRequest("L40S", capacity=Capacity.ON_DEMAND, regions=("west",)))
    everything = await cache.get(provider, GpuRequest("L40S"))
    assert provider.requests == [GpuRequest("L40S")]  # asked once, for both capacities and every region
    assert {o.offer_id for o in spot} == {"spot-east", "spot-west"}
    assert [o.offer_id for o in on_demand] == ["od-west"]
    assert len(everything) == 4


async def test_failures_are_not_cached_but_the_last_good_answer_stays_readable(clock: FakeClock) -> None:
    provider, cache = CountingProvider(), OfferCache(clock, ttl=60)
    provider.fail_next = 1
    with pytest.raises(Transient):
        await cache.get(provider, GpuRequest("A100-80GB-PCIe"))
    assert cache.peek("acme", "A100-80GB-PCIe", 1) is None
    good = await cache.get(provider, GpuRequest("A100-80GB-PCIe"))
    assert len(provider.requests) == 2
    clock.advance(120)
    provider.fail_next = 1
    with pytest.raises(Transient):
        await cache.get(provider, GpuRequest("A100-80GB-PCIe"))
    assert cache.peek("acme", "A100", 1) == good  # stale, still there, and read without a call
    assert cache.age("acme", "A100-80GB-PCIe", 1) == 120
    assert len(provider.requests) == 3


async def test_concurrent_gets_for_one_key_share_one_call(clock: FakeClock) -> None:
    provider, cache = CountingProvider(), OfferCache(clock)
    provider.gate = asyncio.Event()
    waiting = [asyncio.ensure_future(cache.get(provider, GpuRequest("H100"))) for _ in range(5)]
    await asyncio.sleep(0)
    provider.gate.set()
    results = await asyncio.gather(*waiting)
    assert len(provider.requests) == 1
    assert all(r == results[0] for r in results)


async def test_invalidate_forgets_one_provider_or_all(clock: FakeClock) -> None:
    a, b = CountingProvider("a"), CountingProvider("b")
    cache = OfferCache(clock)
    for p in (a, b):
        await cache.get(p, GpuRequest("H100"))
    cache.invalidate("a")
    assert cache.peek("a", "H100", 1) is None and cache.peek("b", "H100", 1) is not None
    cache.invalidate()
    assert cache.peek("b", "H100", 1) is None


def test_a_negative_ttl_is_refused(clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="ttl"):
        OfferCache(clock, ttl=-1)
