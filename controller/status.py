"""Fleet status as plain rows: shared by `scalectl status`, `describe` and the daemon's /v1/status."""

from __future__ import annotations

from typing import Any

from controller.store.repository import Store
from domain.instance import InstanceState

# Columns of the status table; every instance not ready or draining counts as pending.
COUNTS = (InstanceState.READY.value, InstanceState.PENDING.value, InstanceState.DRAINING.value)
COLUMNS = ["tier", "desired", *COUNTS, "cost_per_hour", "capacity", "gpu"]


def _row(tier: str, desired: int | None, capacity: Any, gpu: Any) -> dict[str, Any]:
    return {
        "tier": tier,
        "desired": desired,
        **dict.fromkeys(COUNTS, 0),
        "cost_per_hour": 0.0,
        "capacity": capacity,
        "gpu": gpu,
    }


def fleet_status(store: Store) -> list[dict[str, Any]]:
    """Per tier: desired / ready / pending / draining counts and $/hour of everything that bills."""
    tiers = store.tier_specs()
    states = store.policy_states()
    rows: dict[str, dict[str, Any]] = {
        name: _row(name, states.get(name, (None, None))[1], spec.get("capacity"), spec.get("gpu"))
        for name, spec in tiers.items()
    }
    for inst in store.instances(limit=1_000_000):
        row = rows.setdefault(inst.tier, _row(inst.tier, None, None, None))
        column = inst.state if inst.state in (InstanceState.READY, InstanceState.DRAINING) else InstanceState.PENDING
        row[InstanceState(column).value] += 1
        row["cost_per_hour"] = round(row["cost_per_hour"] + inst.price_per_hour, 4)
    return [rows[name] for name in sorted(rows)]
