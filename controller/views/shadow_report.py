"""`scalectl report`: what each tier would have run and cost over a window, from its recorded decisions
(each desired count holds until the next decision) × the tier's catalogue price, beside what the current
fleet ran and cost: a count the operator gives per tier (what the existing autoscaler kept), priced the same
way over the same hours. An observing daemon (`scalectl daemon --observe`) records the decisions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REPORT_COLUMNS = [
    "tier", "hours", "would_avg", "would_peak", "would_cost", "current", "current_cost", "difference", "price_per_hour",
]  # fmt: skip


def instance_hours(steps: Sequence[tuple[float, int]], end: float) -> tuple[float, float, int]:
    """(instance-hours, hours covered, peak count) of the step function ``steps`` ((t, desired), oldest
    first) up to ``end``. The window is covered from its first decision: before it, nothing is known."""
    if not steps:
        return 0.0, 0.0, 0
    total, peak = 0.0, 0
    for (t, desired), following in zip(steps, [*(t for t, _ in steps[1:]), end], strict=True):
        total += desired * max(0.0, following - t) / 3600
        peak = max(peak, desired)
    return total, (end - steps[0][0]) / 3600, peak


def tier_report(
    name: str, steps: Sequence[tuple[float, int]], end: float, price: float | None, current: int | None
) -> dict[str, Any]:
    """One row. Costs are None when the catalogue has no price for the tier's GPU, and the current fleet's
    when the operator gave no count for the tier: unknown, never zero."""
    used, hours, peak = instance_hours(steps, end)
    would_cost = None if price is None else round(used * price, 2)
    current_cost = None if price is None or current is None else round(current * hours * price, 2)
    difference = None if would_cost is None or current_cost is None else round(would_cost - current_cost, 2)
    return {
        "tier": name,
        "hours": round(hours, 2),
        "would_avg": round(used / hours, 2) if hours else None,
        "would_peak": peak if steps else None,
        "would_cost": would_cost,
        "current": current,
        "current_cost": current_cost,
        "difference": difference,
        "price_per_hour": price,
    }


def shadow_report(
    decisions: Mapping[str, Sequence[tuple[float, int]]],
    prices: Mapping[str, float | None],
    current: Mapping[str, int],
    end: float,
) -> list[dict[str, Any]]:
    """A row per tier in ``prices`` (the configured tiers), by name."""
    return [tier_report(n, decisions.get(n, []), end, prices[n], current.get(n)) for n in sorted(prices)]
