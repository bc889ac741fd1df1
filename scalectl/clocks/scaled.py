"""A clock that runs faster than the wall: for time-accelerated demos of the simulated cloud."""

from __future__ import annotations

import asyncio
import time


class ScaledClock:
    """``now()`` advances ``scale`` virtual seconds per real second, from ``start``."""

    def __init__(self, scale: float, start: float | None = None):
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.scale = scale
        self._real0 = time.monotonic()
        self._virtual0 = time.time() if start is None else start

    def now(self) -> float:
        return self._virtual0 + (time.monotonic() - self._real0) * self.scale

    def monotonic(self) -> float:
        return (time.monotonic() - self._real0) * self.scale

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.scale)
