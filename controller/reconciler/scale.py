"""Scale arithmetic: what counts toward a tier, and which instances to retire first."""

from __future__ import annotations

from collections.abc import Sequence

from scalectl.domain.instance import NOT_READY, Instance, InstanceState


def counted(instances: Sequence[Instance]) -> list[Instance]:
    """Instances that count toward the tier's size (see ``Instance.counted``)."""
    return [i for i in instances if i.counted]


def retirement_order(instances: Sequence[Instance], preferred_capacity: str) -> list[Instance]:
    """Who goes first on scale-in: not-yet-ready instances (newest first: least sunk cost, no traffic),
    then ready fallback instances (capacity other than the tier's own), then the most expensive, newest
    first among equals."""
    not_ready = sorted((i for i in instances if i.state in NOT_READY), key=lambda i: -i.created_at)
    ready = sorted(
        (i for i in instances if i.state is InstanceState.READY),
        key=lambda i: (i.capacity == preferred_capacity, -i.price_per_hour, -i.created_at),
    )
    return not_ready + ready
