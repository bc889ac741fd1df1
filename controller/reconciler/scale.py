"""Scale arithmetic: what counts toward a tier, and which instances to retire first."""

from __future__ import annotations

from collections.abc import Sequence

from controller.store.models import InstanceRecord

NOT_READY = ("pending", "provisioning", "bootstrapping")
COUNTED = (*NOT_READY, "ready")


def counted(rows: Sequence[InstanceRecord]) -> list[InstanceRecord]:
    """Instances that count toward the tier's size: everything not draining, except surges not yet ready
    (a surge replaces a fallback instance; it only counts once it can take the other's place)."""
    return [r for r in rows if r.state in COUNTED and not (r.surge and r.state != "ready")]


def retirement_order(rows: Sequence[InstanceRecord], preferred_capacity: str) -> list[InstanceRecord]:
    """Who goes first on scale-in: not-yet-ready instances (newest first: least sunk cost, no traffic),
    then ready fallback instances (capacity other than the tier's own), then the most expensive, newest
    first among equals."""
    not_ready = sorted((r for r in rows if r.state in NOT_READY), key=lambda r: -r.created_at)
    ready = sorted(
        (r for r in rows if r.state == "ready"),
        key=lambda r: (r.capacity == preferred_capacity, -r.price_per_hour, -r.created_at),
    )
    return not_ready + ready
