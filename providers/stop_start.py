"""Stop and start, the parts every adapter shares: what counts as "already there" (both calls are
idempotent) and the refusal of an adapter or instance that cannot be stopped."""

from __future__ import annotations

from scalectl.providers.base import InstanceStatus
from scalectl.providers.errors import NotSupported

# A stop asked of an instance in one of these is done already; a start, likewise.
STOPPED_ALREADY = frozenset({InstanceStatus.STOPPED, InstanceStatus.STOPPING})
STARTED_ALREADY = frozenset({InstanceStatus.RUNNING, InstanceStatus.PENDING})


def refuse(operation: str, *, provider: str, why: str) -> NotSupported:
    """The error for a stop or start the adapter will not send (``why`` names the cloud's reason)."""
    return NotSupported(f"{operation} is not supported: {why}; delete and create instead", provider=provider)
