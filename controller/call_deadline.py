"""A deadline on every provider call, so one slow provider account never holds the whole fleet's tick.

A call that has not answered within ``deadline`` seconds is cancelled and answered as ``NoAnswer`` (a
``Transient``: its tier keeps what it has, and says why). From then on the account is *silent*: its calls
fail at once with the same reason, and no tick waits on it again. Whether it answers again is asked off
the tick: a read (``list``, ``get``, ``offers``) made while silent starts one probe in the background (one
at a time, with the same deadline); once a probe answers, the account's calls go out again. So a hung API
costs the tick that finds it one deadline, and other tiers nothing after that; an account that recovers
is used again from the tick after the probe that saw it. Nothing that acts (create, delete, stop, start)
is sent while silent.

A create cut by its deadline may have acted: the request may be at the provider, which makes the machine
and answers too late. It is answered as a create whose answer was lost (``CreateUnconfirmed``,
``providers/create_outcome.py``): its row is kept, the machine adopted when a listing shows it under the
key, and no create sent for that key before the provider's declared ``listing_lag`` has passed. (A plain
retryable error would send it again under the same key a few seconds later, before a lagging listing can
show the first machine, and the second one would bill beside it.) A create refused because the account is
silent was never sent: that one is an ordinary retryable error. A cut delete, stop or start acts on a
machine we already hold, and sending it again is idempotent; they stay retryable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from scalectl.clocks import Clock
from scalectl.controller.provider_proxy import ProviderProxy, as_provider
from scalectl.providers.base import Provider
from scalectl.providers.create_outcome import unconfirmed
from scalectl.providers.errors import Transient

log = logging.getLogger("scalectl.providers")
T = TypeVar("T")
PROBES = frozenset({"list", "get", "offers"})  # reads: safe to send with nobody waiting for the answer


class NoAnswer(Transient):
    """The provider did not answer within the call's deadline (or has not since it last missed one)."""


class DeadlineProvider(ProviderProxy):
    def __init__(self, inner: Provider, deadline: float, clock: Clock, world: Clock | None = None) -> None:
        """``clock``: the real one; the deadline is about this process's loop, not the world's time.
        ``world``: the reconciler's and the adapters' clock (an accelerated demo's), on which a cut
        create's ``settles_at`` is read; ``clock`` when not given."""
        super().__init__(inner)
        if deadline <= 0:
            raise ValueError(f"a provider call deadline must be > 0 seconds, got {deadline}")
        self.deadline = deadline
        self._clock = clock
        self._world = world if world is not None else clock
        self._silent_since: float | None = None  # monotonic: when it missed a deadline; None: it answers
        self._probe: asyncio.Task[None] | None = None

    @property
    def silent(self) -> bool:
        return self._silent_since is not None

    async def _around(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if self._silent_since is not None:
            self._ask_again(operation, call)
            waited = self._clock.monotonic() - self._silent_since
            raise NoAnswer(
                f"{operation} not sent: the API has not answered within {self.deadline:g}s for {waited:.0f}s "
                "(asked again in the background)",
                provider=self.name,
            )
        try:
            return await asyncio.wait_for(call(), self.deadline)
        except TimeoutError:
            self._missed(operation)
            what = f"{operation}: no answer within {self.deadline:g}s"
            if operation == "create":  # it may be at the provider: unknown, adopt; never sent again at once
                lag = self.inner.capabilities.listing_lag
                raise unconfirmed(what, provider=self.name, clock=self._world, listing_lag=lag) from None
            raise NoAnswer(what, provider=self.name) from None

    def _missed(self, operation: str) -> None:
        if self._silent_since is None:
            self._silent_since = self._clock.monotonic()
            log.warning(
                "provider %s: %s did not answer within %gs; its tiers hold until it does", self.name, operation,
                self.deadline,
            )  # fmt: skip

    def _ask_again(self, operation: str, call: Callable[[], Awaitable[object]]) -> None:
        """Start a probe with this read, unless one runs already (or this call would act)."""
        if operation in PROBES and (self._probe is None or self._probe.done()):
            self._probe = asyncio.ensure_future(self._probing(call))

    async def _probing(self, call: Callable[[], Awaitable[object]]) -> None:
        try:
            await asyncio.wait_for(call(), self.deadline)
        except TimeoutError:
            return  # still silent: the next read asks again
        except Exception as exc:  # an error answer is an answer: the API is back (the next calls say how)
            log.debug("provider %s: the probe was answered with %s", self.name, exc)
        if self._silent_since is not None:
            silent_for = self._clock.monotonic() - self._silent_since
            self._silent_since = None
            log.info(
                "provider %s answers again within its %gs deadline (silent for %.0fs)", self.name, self.deadline,
                silent_for,
            )  # fmt: skip

    async def aclose(self) -> None:
        if self._probe is not None and not self._probe.done():
            self._probe.cancel()
        await self.inner.aclose()


def with_deadline(provider: Provider, deadline: float, clock: Clock, world: Clock | None = None) -> Provider:
    return as_provider(DeadlineProvider(provider, deadline, clock, world))
