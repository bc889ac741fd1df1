"""A provider whose API can stop answering: while ``hang`` is set, every call waits until it is cleared
(what a cloud whose API hangs looks like from the adapter's side). Counts the calls that reached it, and
those still waiting; ``on_call`` runs as each call starts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from scalectl.controller.provider_proxy import ProviderProxy
from scalectl.providers.base import Provider

T = TypeVar("T")


class HangingProvider(ProviderProxy):
    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
        self.hang = False
        self.started: list[str] = []  # operations, in the order they reached the API
        self.in_flight = 0
        self.on_call: Callable[[str], None] | None = None

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        self.started.append(operation)
        if self.on_call is not None:
            self.on_call(operation)
        self.in_flight += 1
        try:
            while self.hang:
                await asyncio.sleep(0.01)
            return await call()
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        self.hang = False
        await self.inner.aclose()
