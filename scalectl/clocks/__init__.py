"""The injected clock. Production code asks a Clock for time; tests and the simulator move a FakeClock."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going back (for durations and rate limiters)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here, not at the top: commands that only read the store start faster without it

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """Time that moves only when told to (Karpenter's ``env.Clock.Step``). ``sleep`` advances it at once."""

    def __init__(self, start: float = 1_767_225_600.0):  # 2026-01-01T00:00:00Z
        self._now = float(start)
        self._origin = float(start)

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now - self._origin

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError("FakeClock cannot go back in time")
        self._now = float(t)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("FakeClock cannot go back in time")
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)
