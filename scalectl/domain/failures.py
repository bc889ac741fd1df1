"""What failures taught the fleet, as plain values: the event kinds the reconciler records about failures and
the ``FailureHistory`` the store reads back from them, from which the reconciler's back-offs are rebuilt after a
restart. Plain data, so the reconciler's planning stays free of the store."""

from __future__ import annotations

from dataclasses import dataclass, field

# Event kinds the reconciler writes, read back here (instance events carry the instance's key).
NO_CAPACITY = "no-capacity"
PROVIDER_REFUSED = "provider-refused"
CREATE_BACKOFF = "create-backoff"
LAUNCHED = "launched"
CRASH_BACKOFF = "crash-backoff"
SPOT_WAIT = "spot-wait"  # a spot tier found no spot offer and waits fallback_after before on-demand


@dataclass(frozen=True)
class FailureHistory:
    interruptions: list[tuple[str, float]] = field(default_factory=list)  # (tier, t)
    no_capacity: list[tuple[str, str, str, float]] = field(default_factory=list)  # (provider, offer, capacity, t)
    refused: list[tuple[str, float]] = field(default_factory=list)  # (provider, t)
    create_backoffs: list[tuple[str, float]] = field(default_factory=list)  # (tier, t) since its last launch
    crashes: list[tuple[str, str, str, float]] = field(default_factory=list)  # (tier, provider, offer, t)
    spot_waits: list[tuple[str, float]] = field(default_factory=list)  # (tier, since) of a wait still open
