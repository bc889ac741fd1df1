"""Fleet status as plain data: one document for `scalectl status -o json|yaml` and the daemon's /v1/status,
whose rows `scalectl status` and `describe` also print."""

from __future__ import annotations

from typing import Any

from controller.ha.replica import ReplicaView
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


def status_document(store: Store, view: ReplicaView, now: float, stale_after: float) -> dict[str, Any]:
    """What `scalectl status -o json` prints and `GET /v1/status` answers: the tiers' rows, the leader and
    the replicas (built here once, so the two can never drift apart)."""
    return {"tiers": fleet_status(store), **replicas_status(view, now, stale_after)}
