"""Provider offers, cached per (provider, GPU, count) for a TTL on the injected clock.

Offers change on the scale of minutes and cost one or more API calls (some providers rate-limit
hard), so every reader shares one fetch per key per TTL. The cache always fetches the broad request
(both capacities, every region) and narrows per caller, so one entry serves a spot and an
on-demand question alike. Failures are not cached: the next ``get`` asks again. The last good
answer stays readable (``peek``) after it goes stale, for callers that prefer old offers to none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass

from scalectl.clocks import Clock
from scalectl.providers.base import GpuRequest, Offer, Provider
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu

DEFAULT_TTL = 60.0

CacheKey = tuple[str, str, int]  # (provider name, canonical GPU name, GPUs per offer)


@dataclass(frozen=True, slots=True)
class _Entry:
    fetched_at: float
    offers: tuple[Offer, ...]


@functools.lru_cache(maxsize=1024)
def cache_key(provider: str, gpu: str, count: int) -> CacheKey:
    """GPU spellings ("H100", "h100-sxm5") share one entry; an unknown name is kept as written. Remembered:
    the GPU catalogue is fixed, and the reconciler asks for every tier's key several times a tick."""
    with contextlib.suppress(UnknownGpu):
        gpu = normalize_gpu(gpu)
    return (provider, gpu, count)


def narrow(offers: tuple[Offer, ...] | list[Offer], want: GpuRequest) -> list[Offer]:
    """The offers that answer ``want``: sold at its capacity (if given) and in its regions (if given)."""
    return [
        o
        for o in offers
        if (want.capacity is None or o.price(want.capacity) is not None)
        and (not want.regions or o.region in want.regions)
    ]


class OfferCache:
    """``get(provider, request)`` answers from cache when the entry is younger than ``ttl`` seconds."""

    def __init__(self, clock: Clock, ttl: float = DEFAULT_TTL):
        if ttl < 0:
            raise ValueError(f"offer cache ttl must be >= 0 seconds, got {ttl}")
        self.clock = clock
        self.ttl = ttl
        self._entries: dict[CacheKey, _Entry] = {}
        self._in_flight: dict[CacheKey, asyncio.Task[tuple[Offer, ...]]] = {}

    async def get(self, provider: Provider, request: GpuRequest) -> list[Offer]:
        """Offers of ``provider`` for ``request``; fetched at most once per key per TTL. Raises what
        the provider raises (nothing is cached then)."""
        key = cache_key(provider.name, request.gpu, request.count)
        entry = self._entries.get(key)
        if entry is None or self._expired(entry):
            entry = _Entry(self.clock.now(), await self._fetch(key, provider, request))
            self._entries[key] = entry
        return narrow(entry.offers, request)

    def peek(self, provider: str, gpu: str, count: int) -> list[Offer] | None:
        """The last good answer for the key, however old; None when there never was one. No call."""
        entry = self._entries.get(cache_key(provider, gpu, count))
        return list(entry.offers) if entry is not None else None

    def stale(self, provider: str, gpu: str, count: int) -> bool:
        """Whether ``get`` would call the provider for the key (never fetched, or older than the TTL)."""
        entry = self._entries.get(cache_key(provider, gpu, count))
        return entry is None or self._expired(entry)

    def _expired(self, entry: _Entry) -> bool:
        return self.clock.now() - entry.fetched_at >= self.ttl

    def age(self, provider: str, gpu: str, count: int) -> float | None:
        entry = self._entries.get(cache_key(provider, gpu, count))
        return self.clock.now() - entry.fetched_at if entry is not None else None

    def invalidate(self, provider: str | None = None) -> None:
        """Forget every entry (or one provider's): the next ``get`` fetches."""
        for key in [k for k in self._entries if provider is None or k[0] == provider]:
            del self._entries[key]

    async def _fetch(self, key: CacheKey, provider: Provider, request: GpuRequest) -> tuple[Offer, ...]:
        # Concurrent callers for one key share one provider call instead of each making their own.
        task = self._in_flight.get(key)
        if task is None:
            broad = GpuRequest(gpu=request.gpu, count=request.count)
            task = asyncio.ensure_future(_offers(provider, broad))
            self._in_flight[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    def _forget(self, key: CacheKey, done: asyncio.Task[tuple[Offer, ...]]) -> None:
        if self._in_flight.get(key) is done:
            del self._in_flight[key]


async def _offers(provider: Provider, request: GpuRequest) -> tuple[Offer, ...]:
    return tuple(await provider.offers(request))
