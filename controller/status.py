"""Fleet status as plain rows: shared by `scalectl status`, `describe` and the daemon's /v1/status."""

from __future__ import annotations

from typing import Any

from controller.ha.replica import ReplicaView
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


def replicas_status(view: ReplicaView, now: float, stale_after: float) -> dict[str, Any]:
    """The leader (host, PID, since, epoch) and every replica with its role, as status shows them."""
    lease = view.leader
    leader = None
    if lease is not None:
        leader = {
            "host": lease.host,
            "pid": lease.pid,
            "epoch": lease.epoch,
            "since": lease.acquired_at,
            "lease_expires_in": round(lease.expires_at - now, 1),
        }
    replicas = [
        {
            "host": r.host,
            "pid": r.pid,
            "role": "leader"
            if lease is not None and lease.holder == r.holder and lease.expires_at > now
            else "standby",
            "started_at": r.started_at,
            "seen_ago": round(now - r.seen_at, 1),
            "http": r.http,
        }
        for r in view.replicas
        if now - r.seen_at <= stale_after
    ]
    return {"leader": leader, "replicas": replicas}
