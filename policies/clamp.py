"""Hard limits applied after every policy: tier [min, max], then the $/hour budget (which wins over min)."""

from __future__ import annotations

import math

from scalectl.policies.types import Bounds


def max_affordable(bounds: Bounds) -> int | None:
    """floor(budget / price per instance-hour), or None when there is no budget or no known price."""
    if bounds.budget_per_hour is None or not bounds.price_per_instance_hour:
        return None
    # round() first: 9.6 / 2.4 must be 4, not 3.9999999999999996.
    return max(0, math.floor(round(bounds.budget_per_hour / bounds.price_per_instance_hour, 9)))


def clamp(desired: int, bounds: Bounds) -> tuple[int, list[str]]:
    """The count after the tier's limits, and a note for each limit that changed it."""
    value, notes = desired, []
    if value < bounds.min:
        value = bounds.min
        notes.append(f"raised to tier min {bounds.min}")
    if value > bounds.max:
        value = bounds.max
        notes.append(f"capped at tier max {bounds.max}")
    affordable = max_affordable(bounds)
    if affordable is not None and value > affordable:
        value = affordable
        note = (
            f"capped at {affordable} by the budget ${bounds.budget_per_hour:g}/h"
            f" ÷ ${bounds.price_per_instance_hour:g}/h per instance"
        )
        if affordable < bounds.min:
            note += f" (below tier min {bounds.min}: the budget is a hard money cap and wins)"
        notes.append(note)
    return value, notes
