"""Fleet status as plain rows: shared by `scalectl status`, `describe` and the daemon's /v1/status."""

from __future__ import annotations

from typing import Any

from controller.store.repository import Store


def fleet_status(store: Store) -> list[dict[str, Any]]:
    """Per tier: desired / ready / pending / draining counts and $/hour of everything that bills."""
    tiers = store.tier_specs()
    states = store.policy_states()
    rows: dict[str, dict[str, Any]] = {
        name: {
            "tier": name,
            "desired": states.get(name, (None, None))[1],
            "ready": 0,
            "pending": 0,
            "draining": 0,
            "cost_per_hour": 0.0,
            "capacity": spec.get("capacity"),
            "gpu": spec.get("gpu"),
        }
        for name, spec in tiers.items()
    }
    for inst in store.instances(limit=1_000_000):
        row = rows.setdefault(
            inst.tier,
            {
                "tier": inst.tier,
                "desired": None,
                "ready": 0,
                "pending": 0,
                "draining": 0,
                "cost_per_hour": 0.0,
                "capacity": None,
                "gpu": None,
            },
        )
        if inst.state == "ready":
            row["ready"] += 1
        elif inst.state == "draining":
            row["draining"] += 1
        else:
            row["pending"] += 1
        row["cost_per_hour"] = round(row["cost_per_hour"] + inst.price_per_hour, 4)
    return [rows[name] for name in sorted(rows)]
