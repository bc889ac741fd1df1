"""One tier's gate at the activator: the requests it holds while the tier has no ready instance, and the
addresses it hands them to once it has.

A gate is plain bookkeeping on one event loop (no locks needed): ``hold`` admits a request or refuses it at
the bound, ``wait_ready`` waits for an address, ``set_endpoints`` releases every waiter at once.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HoldLimits:
    max_held: int = 100  # requests held at once; the next one is refused (503 with Retry-After)
    max_wait_s: float = 300.0  # a held request not handed to an instance by then is answered 503
    max_body_bytes: int = 4 * 1024 * 1024  # a request body above this is refused (413) before it is buffered


class TierGate:
    def __init__(self, tier: str, limits: HoldLimits):
        self.tier = tier
        self.limits = limits
        self.held = 0
        self.arrivals = 0  # requests that reached the gate since the last ``take_arrivals``
        self._endpoints: tuple[str, ...] = ()
        self._ready = asyncio.Event()
        self._turn = itertools.count()
        self._closed = False

    @property
    def endpoints(self) -> tuple[str, ...]:
        return self._endpoints

    @property
    def closed(self) -> bool:
        return self._closed

    def set_endpoints(self, addresses: tuple[str, ...]) -> None:
        """The tier's ready addresses; the first non-empty list releases every held request."""
        self._endpoints = addresses
        if addresses:
            self._ready.set()
        else:
            self._ready.clear()

    def close(self) -> None:
        """The tier is gone or no longer activated: held requests are released and answered 503."""
        self._closed = True
        self._ready.set()

    def admit(self) -> bool:
        """Count an arriving request; False when it cannot be held (the gate is full)."""
        self.arrivals += 1
        if self._endpoints:
            return True  # it will be handed on at once, never held
        if self.held >= self.limits.max_held:
            return False
        self.held += 1
        return True

    def release(self) -> None:
        self.held = max(0, self.held - 1)

    async def wait_ready(self, within: float) -> bool:
        """True once an address is known (at once if one is), False after ``within`` seconds or when closed."""
        if self._endpoints:
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), within)
        except TimeoutError:
            return False
        return bool(self._endpoints) and not self._closed

    def next_endpoints(self) -> list[str]:
        """Every address, starting at the next one in turn: the first to try, then where to fall back."""
        addresses = list(self._endpoints)
        if not addresses:
            return []
        start = next(self._turn) % len(addresses)
        return addresses[start:] + addresses[:start]

    def take_arrivals(self) -> int:
        count, self.arrivals = self.arrivals, 0
        return count
