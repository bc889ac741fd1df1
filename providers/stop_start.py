"""Stop and start, the parts every adapter shares: what counts as "already there" (both calls are
idempotent) and the refusal of an adapter or instance that cannot be stopped."""

from __future__ import annotations

from typing import Any

from scalectl.providers.base import InstanceStatus
from scalectl.providers.errors import NotSupported

# A stop asked of an instance in one of these is done already; a start, likewise.
STOPPED_ALREADY = frozenset({InstanceStatus.STOPPED, InstanceStatus.STOPPING})
STARTED_ALREADY = frozenset({InstanceStatus.RUNNING, InstanceStatus.PENDING})


def refuse(operation: str, *, provider: str, why: str) -> NotSupported:
    """The error for a stop or start the adapter will not send (``why`` names the cloud's reason)."""
    return NotSupported(f"{operation} is not supported: {why}; delete and create instead", provider=provider)


def storage_price(provider: Any) -> float | None:
    """$ an hour a stopped machine of ``provider`` bills (its disk), where the adapter knows one figure (the
    simulated cloud's ``storage_per_hour``); None where the cloud prices storage per volume size and region
    and the adapter does not read it (RunPod, Vast.ai, EC2 today)."""
    value = getattr(provider, "storage_per_hour", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
