"""Which daemon should hold which lease when tiers are sharded: rendezvous (highest-random-weight) hashing.

Every daemon computes the same answer from the same list of live replicas, with no coordination beyond
the replica heartbeats already stored. When a daemon joins or leaves, only the leases whose highest
weight moves to (or from) it change hands — about 1/N of them — so rebalancing moves the least work.
The assignment only says who *should* hold a lease; the leases themselves (conditional updates with
epochs) decide who *does*, so two daemons with different views of the replicas never both act.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalectl.controller.ha.lease import GLOBAL_LEASE

# Sharded, the one global lease is the housekeeping lease: its holder deletes orphans and prunes history.
HOUSEKEEPING = GLOBAL_LEASE
TIER_LEASE_PREFIX = "tier:"


def tier_lease(tier: str) -> str:
    return f"{TIER_LEASE_PREFIX}{tier}"


def tier_of_lease(name: str) -> str | None:
    return name[len(TIER_LEASE_PREFIX) :] if name.startswith(TIER_LEASE_PREFIX) else None


def _weight(holder: str, lease: str) -> int:
    digest = hashlib.blake2b(f"{holder}\0{lease}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner_of(lease: str, holders: Sequence[str]) -> str | None:
    """The holder with the highest weight for ``lease`` (ties, which need a hash collision, go by name)."""
    if not holders:
        return None
    return max(holders, key=lambda h: (_weight(h, lease), h))


def assignment(leases: Iterable[str], holders: Sequence[str]) -> dict[str, str]:
    """Lease -> the holder that should hold it. Empty when there are no holders."""
    if not holders:
        return {}
    return {lease: owner_of(lease, holders) or "" for lease in leases}


@dataclass(frozen=True)
class TickScope:
    """What one tick may act on: its tiers, and whether it also does the fleet-wide housekeeping."""

    tiers: frozenset[str]
    housekeeping: bool

    def owns(self, tier: str) -> bool:
        return tier in self.tiers
