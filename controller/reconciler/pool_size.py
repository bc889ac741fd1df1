"""``warm_pool: {size: auto}``: the pool's size from what the decision core measured, each tick.

The rule (docs/warm-pool.md, "size: auto"), in two steps:

1. **How many a surprise needs.** The core sizes the tier on its highest forecast at the boot horizon plus
   that forecast's measured shortfall, the p90 of actual − predicted (``MeasureState.sized``). A shortfall
   larger than that is a surprise the running fleet does not cover, and a cold boot is what it waits for.
   The pool holds that p90 in instances: ``ceil(p90 error ÷ capacity per instance)``, the larger over the
   measures (requests, tokens), within ``max``. Unknown (no core state yet, fewer than five errors): the
   pool holds what it has and grows by nothing, and the reason says so (unknown is not zero).
2. **Whether its disks pay.** A member started instead of created serves ``cold − resume`` seconds
   sooner: that much GPU time of an instance launched ahead for the surprise, at the GPU price, is what one
   surprise costs without it. A member bills its disk every hour it waits for one; the wait is the time
   between surprises on the core's record: the span its errors cover (at least 30 s apart) ÷ the errors at
   or above the p90. When the disk's bill over that wait exceeds what a surprise costs, the pool is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalectl.controller.views.capacity import learned_capacity
from scalectl.policies.core.constants import ERR_SAMPLE_S
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import TierSpec


@dataclass(frozen=True, slots=True)
class PoolSize:
    size: int
    reason: str


def auto_size(
    tier: TierSpec,
    state: PolicyState | None,
    *,
    price_per_hour: float | None,
    storage_per_hour: float | None,
    cold_s: float | None,
    resume_s: float | None,
) -> PoolSize:
    """The size of a ``size: auto`` pool this tick (``most``: the pool's max), and why, in one sentence."""
    pool = tier.warm_pool
    assert pool is not None and pool.auto
    view = learned_capacity(tier, state) if state is not None and state.core is not None else None
    measures = (view or {}).get("measures") or {}
    shortfalls = {
        name: m["forecast_error_p90"] / m["per_instance"]
        for name, m in measures.items()
        if m.get("forecast_error_p90") is not None and m.get("per_instance")
    }
    if not shortfalls:
        return PoolSize(0, "auto: the core's forecast error is not measured yet; the pool holds what it has")
    name, need = max(shortfalls.items(), key=lambda kv: kv[1])
    count = min(pool.most, math.ceil(need - 1e-9))
    why = f"auto: the p90 forecast shortfall is {need:.2f} instances ({name})"
    if count < math.ceil(need - 1e-9):
        why += f", capped at max {pool.most}"
    if count == 0 or storage_per_hour is None or price_per_hour is None or cold_s is None or resume_s is None:
        unknown = " (the disk's or the GPU's price, or a boot time, unknown: sized on the error alone)"
        return PoolSize(count, why + (unknown if count else ""))
    surprise = price_per_hour * max(0.0, cold_s - resume_s) / 3600.0
    wait_h = _hours_between_surprises(state, name)
    bill = storage_per_hour * wait_h
    if bill > surprise:
        return PoolSize(
            0,
            f"{why}; but a disk's ${bill:.3f} over the {wait_h:.1f} h between surprises is more than the "
            f"${surprise:.3f} a surprise costs without a member: no pool",
        )
    return PoolSize(count, f"{why}; a disk's ${bill:.3f} between surprises < ${surprise:.3f} a surprise costs")


def _hours_between_surprises(state: PolicyState | None, measure: str) -> float:
    """The span the core's error record covers ÷ the errors at or above its p90 (at least one)."""
    core = state.core if state is not None else None
    m = core.measures.get(measure) if core is not None else None
    if m is None or not m.sized.errors:
        return 0.0
    errors = m.sized.errors
    p90 = m.sized.quantile() or 0.0
    surprises = max(1, sum(1 for e in errors if e >= p90 and e > 0))
    return len(errors) * ERR_SAMPLE_S / surprises / 3600.0
