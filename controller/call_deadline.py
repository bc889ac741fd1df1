"""A deadline on every provider call, so one slow provider account never holds the whole fleet's tick.

A call that has not answered within ``deadline`` seconds is cancelled and answered as ``NoAnswer`` (a
``Transient``: its tier keeps what it has, and says why); for the next ``deadline`` seconds the account's
other calls fail at once with the same reason instead of each waiting out a deadline of its own, so a hung
API costs a tick one deadline, not one per call and phase. Cancelling a create is safe by the crash rule:
its intent is stored first, and the next tick asks again under the same key."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from scalectl.clocks import Clock
from scalectl.controller.provider_proxy import ProviderProxy, as_provider
from scalectl.providers.base import Provider
from scalectl.providers.errors import Transient

log = logging.getLogger("scalectl.providers")
T = TypeVar("T")


class NoAnswer(Transient):
    """The provider did not answer within the call's deadline (or did not, moments ago)."""


class DeadlineProvider(ProviderProxy):
    def __init__(self, inner: Provider, deadline: float, clock: Clock) -> None:
        """``clock``: the real one; the deadline is about this process's loop, not the world's time."""
        super().__init__(inner)
        if deadline <= 0:
            raise ValueError(f"a provider call deadline must be > 0 seconds, got {deadline}")
        self.deadline = deadline
        self._clock = clock
        self._quiet_until = 0.0
        self._silent = False  # logged the current streak of missed deadlines already

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        now = self._clock.monotonic()
        if now < self._quiet_until:
            raise NoAnswer(
                f"{operation} not sent: the API did not answer within {self.deadline:g}s moments ago",
                provider=self.name,
                retry_after=self._quiet_until - now,
            )
        try:
            result = await asyncio.wait_for(call(), self.deadline)
        except TimeoutError:
            self._quiet_until = self._clock.monotonic() + self.deadline
            if not self._silent:
                self._silent = True
                log.warning(
                    "provider %s: %s did not answer within %gs; its tiers hold until it does", self.name, operation,
                    self.deadline,
                )  # fmt: skip
            raise NoAnswer(f"{operation}: no answer within {self.deadline:g}s", provider=self.name) from None
        if self._silent:
            self._silent = False
            log.info("provider %s answers again within its %gs deadline", self.name, self.deadline)
        return result


def with_deadline(provider: Provider, deadline: float, clock: Clock) -> Provider:
    return as_provider(DeadlineProvider(provider, deadline, clock))
