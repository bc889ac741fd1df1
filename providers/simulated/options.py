"""Options of the simulated cloud (``type: simulated``, or keyword overrides in tests and the simulator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_REGIONS = ("sim-east", "sim-west")


@dataclass(frozen=True)
class SimOptions:
    seed: int = 7
    regions: tuple[str, ...] = DEFAULT_REGIONS
    provision_delay_min: float = 120.0  # seconds from create to serving (boot + image + weights)
    provision_delay_max: float = 300.0
    capacity_per_offer: int = 10_000  # machines an offer can hand out at once
    spot_interruptions_per_hour: float = 0.0  # per spot instance
    interruption_notice: float = 120.0
    state_path: str | None = None
    create_delay: float = 0.0  # seconds `create` takes to answer after the instance exists (lost answers)
    # Stop and start: a stopped machine gives its GPU back to the pool and bills only its disk; a start
    # takes the resume delay (no image pull, weights on disk) and fails when the pool has no room left,
    # or at random with ``resume_failure_rate`` (the GPU taken by another customer meanwhile).
    resume_delay_min: float = 30.0
    resume_delay_max: float = 60.0
    resume_failure_rate: float = 0.0
    storage_per_hour: float = 0.02  # $ per hour for a stopped machine's disk

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> SimOptions:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"simulated provider: unknown options {sorted(unknown)}; known: {sorted(known)}")
        values = dict(options)
        if "regions" in values:
            values["regions"] = tuple(values["regions"])
        return cls(**values)
