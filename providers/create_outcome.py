"""A create's outcome when the answer is lost: the provider may have acted, so it is "unknown, adopt",
never "failed" and never "send it again now".

Adapters send their create request through ``send_create`` and call ``unreadable`` for a success whose
body names no instance. Either way the caller gets ``CreateUnconfirmed``: it keeps the row, adopts the
machine when a listing shows it under our key, and sends no create for that key before the adapter's
declared listing lag has passed (a look-up before then cannot yet show what the lost create made).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from scalectl.clocks import Clock
from scalectl.providers.errors import CreateUnconfirmed, NotSent, Transient

T = TypeVar("T")


async def send_create(send: Callable[[], Awaitable[T]], *, provider: str, clock: Clock, listing_lag: float) -> T:
    """Send one create. A request that never went out (``NotSent``) or that the provider refused with
    an answer (4xx, 429) raises as it is; one that went out and got no readable answer (a dropped
    connection, a timeout, a 5xx) raises ``CreateUnconfirmed``."""
    try:
        return await send()
    except NotSent:
        raise
    except Transient as exc:
        raise unconfirmed(str(exc.args[0]), provider=provider, clock=clock, listing_lag=listing_lag) from None


def unconfirmed(what: str, *, provider: str, clock: Clock, listing_lag: float) -> CreateUnconfirmed:
    """The error for a create whose outcome is unknown (``what`` says why)."""
    return CreateUnconfirmed(
        f"create outcome unknown ({what}): the provider may have made it; looked up by key, not created "
        f"again for {listing_lag:g}s (its listing lag)",
        provider=provider,
        settles_at=clock.now() + listing_lag,
    )


def unreadable(what: str, *, provider: str, clock: Clock, listing_lag: float) -> CreateUnconfirmed:
    """A create answered with success but no instance we can read: it was made, we just cannot name it."""
    return unconfirmed(
        f"{what} answered success with no readable instance", provider=provider, clock=clock, listing_lag=listing_lag
    )
