"""A tier's rollout as `scalectl rollout status` and `describe tier` show it: the server its instances
should run, how many run it, how many drifted, and whether the rollout is paused or stopped."""

from __future__ import annotations

from typing import Any

from scalectl.controller.store.repository import Store


def rollout_status(store: Store, tier: str) -> dict[str, Any] | None:
    """None when the tier is not in the applied configuration."""
    from scalectl.tiers.server import server_hash  # the tiers-file models: only the commands that show a rollout

    fleet = store.config.fleet_config()
    if fleet is None or tier not in fleet.tiers:
        return None
    control = store.rollouts.controls().get(tier)
    generation, paused = (control.generation, control.paused) if control else (0, False)
    current = server_hash(fleet.tiers[tier], generation)
    counts = store.rollouts.server_hashes(tier)
    drifted = sum(n for h, n in counts.items() if h not in (None, current))
    failed = store.rollouts.failed_with_server(tier, current) if drifted else None
    if failed:
        state = f"stopped: {failed} on the new server failed"
    elif paused:
        state = "paused"
    elif drifted:
        state = "rolling"
    else:
        state = "complete"
    return {
        "tier": tier,
        "state": state,
        "generation": generation,
        "server": current,
        "current": counts.get(current, 0),
        "drifted": drifted,
        "from_before_hashes": counts.get(None, 0),
    }
