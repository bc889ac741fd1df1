"""Scale arithmetic: what counts toward a tier, and which instances to retire first.

A tier with ``variants`` is counted in *primary units*: each instance is worth its capacity relative to an
instance of the tier's own GPU (``TierSpec.capacity_units``). Without variants every instance is one unit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scalectl.domain.instance import NOT_READY, Instance, InstanceState
from scalectl.tiers.config import TierSpec

EPS = 1e-6  # units are sums of floats: "at least" and "at most" compare with this slack

Units = Callable[[Instance], float]


def counted(instances: Sequence[Instance]) -> list[Instance]:
    """Instances that count toward the tier's size (see ``Instance.counted``)."""
    return [i for i in instances if i.counted]


def units_of(tier: TierSpec) -> Units:
    """An instance's worth in instances of the tier's own GPU (1.0 for every instance of a tier without
    variants)."""
    if not tier.variants:
        return lambda _inst: 1.0
    return lambda inst: tier.capacity_units(inst.gpu, inst.gpu_count)


def total(instances: Sequence[Instance], units: Units) -> float:
    return sum(units(i) for i in instances)


def retirement_order(
    instances: Sequence[Instance], preferred_capacity: str, units: Units | None = None
) -> list[Instance]:
    """Who goes first on scale-in: not-yet-ready instances (newest first: least sunk cost, no traffic),
    then ready fallback instances (capacity other than the tier's own), then the most expensive per unit of
    capacity (per instance, without variants), newest first among equals."""
    worth = units or (lambda _inst: 1.0)
    not_ready = sorted((i for i in instances if i.state in NOT_READY), key=lambda i: -i.created_at)
    ready = sorted(
        (i for i in instances if i.state is InstanceState.READY),
        key=lambda i: (i.capacity == preferred_capacity, -i.price_per_hour / worth(i), -i.created_at),
    )
    return not_ready + ready
