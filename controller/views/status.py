"""Fleet status as plain data: one document for `scalectl status -o json|yaml` and the daemon's /v1/status,
whose rows `scalectl status` and `describe` also print.

The reads come from a ``FleetReads``: the store (ORM), or, for `scalectl status` on an up-to-date SQLite
database, the same queries through the standard library's sqlite3 (controller.views.status_reads), which
starts without importing SQLAlchemy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from scalectl.controller.ha.lease import Lease
from scalectl.controller.ha.replica_view import ReplicaSeen, ReplicaView
from scalectl.controller.ha.shards import TIER_LEASE_PREFIX
from scalectl.controller.unit_cost import WINDOW, BilledSpan, billed_in, cost_per_1k
from scalectl.domain.instance import InstanceState

if TYPE_CHECKING:
    from scalectl.policies.types import PolicyState

# Columns of the status table; every instance not ready, draining or stopped counts as pending.
COUNTS = (
    InstanceState.READY.value,
    InstanceState.PENDING.value,
    InstanceState.DRAINING.value,
    InstanceState.STOPPED.value,
)
_OWN_COLUMN = (InstanceState.READY, InstanceState.DRAINING, InstanceState.STOPPED)
COLUMNS = ["tier", "desired", *COUNTS, "cost_per_hour", "cost_per_1k_requests", "capacity", "gpu"]


class LiveInstance(Protocol):
    """What a status row counts of an instance (an ``InstanceRecord`` is one)."""

    @property
    def tier(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def price_per_hour(self) -> float: ...
    @property
    def storage_per_hour(self) -> float: ...
    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...


class FleetReads(Protocol):
    """The reads a status document is built from (``Store`` has them)."""

    def tier_specs(self) -> dict[str, dict[str, Any]]: ...
    def policy_states(self) -> Mapping[str, tuple[PolicyState, int]]: ...
    def instances(self, *, limit: int) -> Sequence[LiveInstance]: ...
    def requests_by_minute(self, start: float, end: float) -> dict[str, dict[int, float]]: ...
    def instances_billed_since(self, start: float) -> Sequence[BilledSpan]: ...


def _row(tier: str, desired: int | None, capacity: Any, gpu: Any) -> dict[str, Any]:
    return {
        "tier": tier,
        "desired": desired,
        **dict.fromkeys(COUNTS, 0),
        "cost_per_hour": 0.0,
        "cost_per_1k_requests": None,  # over the last hour; None while unknown (too few minutes read)
        "capacity": capacity,
        "gpu": gpu,
    }


def fleet_status(store: FleetReads, now: float | None = None) -> list[dict[str, Any]]:
    """Per tier: desired / ready / pending / draining / stopped counts, $/hour of everything that bills, and the last
    hour's cost per 1,000 requests (tasks, for Celery tiers) when ``now`` is given."""
    tiers = store.tier_specs()
    states = store.policy_states()
    rows: dict[str, dict[str, Any]] = {
        name: _row(name, states.get(name, (None, None))[1], spec.get("capacity"), spec.get("gpu"))
        for name, spec in tiers.items()
    }
    mixed = {name for name, spec in tiers.items() if spec.get("variants")}
    for inst in store.instances(limit=1_000_000):
        row = rows.setdefault(inst.tier, _row(inst.tier, None, None, None))
        column = inst.state if inst.state in _OWN_COLUMN else InstanceState.PENDING
        row[InstanceState(column).value] += 1
        if inst.tier in mixed and inst.state != InstanceState.STOPPED:  # the mix of hardware that serves or boots
            mix = row.setdefault("variants", {})
            mix[hardware_label(inst.gpu, inst.gpu_count)] = mix.get(hardware_label(inst.gpu, inst.gpu_count), 0) + 1
        # a stopped machine bills its disk, not its GPU
        billed = inst.storage_per_hour if inst.state == InstanceState.STOPPED else inst.price_per_hour
        row["cost_per_hour"] = round(row["cost_per_hour"] + billed, 4)
    if now is not None:
        _unit_costs(store, rows, now)
    return [rows[name] for name in sorted(rows)]


def hardware_label(gpu: str, gpu_count: int) -> str:
    """``H100-SXM5-80GB``, or ``2× L40S-48GB`` for a machine of several GPUs: how status names a variant."""
    return gpu if gpu_count == 1 else f"{gpu_count}× {gpu}"


def mix_text(mix: Mapping[str, int] | None) -> str:
    """A tier's variant mix for a table, the most numerous first: ``2× L40S-48GB 4, H100-SXM5-80GB 2``."""
    return ", ".join(f"{label} {n}" for label, n in sorted((mix or {}).items(), key=lambda kv: (-kv[1], kv[0])))


def _unit_costs(store: FleetReads, rows: dict[str, dict[str, Any]], now: float) -> None:
    start = now - WINDOW
    counted = store.requests_by_minute(start, now)
    spans: dict[str, list[tuple[float, float | None, float]]] = {}
    for inst in store.instances_billed_since(start):
        spans.setdefault(inst.tier, []).append((inst.launched, inst.ended, inst.price_per_hour))
    for name, row in rows.items():
        value = cost_per_1k(billed_in(spans.get(name, []), start, now), counted.get(name, {}), start, now)
        row["cost_per_1k_requests"] = None if value is None else round(value, 4)


def replicas_status(view: ReplicaView, now: float, stale_after: float) -> dict[str, Any]:
    """The leader (host, PID, since, epoch) and every replica with its role, as status shows them. A lease
    that has expired names no leader: its holder stopped renewing it."""
    lease = view.leader
    leader = None
    if lease is not None and lease.expires_at > now:
        leader = {
            "host": lease.host,
            "pid": lease.pid,
            "epoch": lease.epoch,
            "since": lease.acquired_at,
            "lease_expires_in": round(lease.expires_at - now, 1),
        }
    tiers: dict[str, list[str]] = {}  # sharded: holder -> the tiers it acts on
    for held in view.tier_leases:
        if held.expires_at > now:
            tiers.setdefault(held.holder, []).append(held.name.removeprefix(TIER_LEASE_PREFIX))
    replicas = [
        {
            "host": r.host,
            "pid": r.pid,
            "role": _role(r, lease, tiers, now),
            "started_at": r.started_at,
            "seen_ago": round(now - r.seen_at, 1),
            "http": r.http,
            "sharded": r.sharded,
            "tiers": sorted(tiers.get(r.holder, [])),
        }
        for r in view.replicas
        if now - r.seen_at <= stale_after
    ]
    return {"leader": leader, "replicas": replicas}


def _role(replica: ReplicaSeen, lease: Lease | None, tiers: dict[str, list[str]], now: float) -> str:
    """``leader``: holds the global lease (all tiers; sharded, the housekeeping); ``shard``: acts on some
    tiers only; ``standby``: acts on nothing."""
    if lease is not None and lease.holder == replica.holder and lease.expires_at > now:
        return "leader"
    return "shard" if tiers.get(replica.holder) else "standby"


def daemon_status(
    view: ReplicaView, now: float, stale_after: float, last_published: float | None = None
) -> dict[str, Any]:
    """Whether a daemon is running (a replica's heartbeat within ``stale_after``), and how old the stored
    figures are: the wall time of the last heartbeat, lease renewal or published tick, whichever is latest
    (None: no daemon ever ran on this store)."""
    running = any(now - r.seen_at <= stale_after for r in view.replicas)
    marks = [r.seen_at for r in view.replicas]
    marks += [lease.renewed_at for lease in (view.leader, *view.tier_leases) if lease is not None]
    marks += [last_published] if last_published is not None else []
    last = max(marks, default=None)
    return {
        "running": running,
        "last_seen": last,
        "data_age_s": None if last is None else round(max(0.0, now - last), 1),
    }


def status_document(
    store: FleetReads,
    view: ReplicaView,
    now: float,
    stale_after: float,
    *,
    world_now: float | None = None,
    last_published: float | None = None,
) -> dict[str, Any]:
    """What `scalectl status -o json` prints and `GET /v1/status` answers: the tiers' rows, the leader and
    the replicas (built here once, so the two can never drift apart), and whether a daemon is running.
    ``now`` is the wall clock (leases and replicas); ``world_now`` the clock the rows are stamped in (a
    demo's may run faster); ``last_published`` the wall time of the daemon's last published tick."""
    return {
        "tiers": fleet_status(store, world_now),
        **replicas_status(view, now, stale_after),
        "daemon": daemon_status(view, now, stale_after, last_published),
    }
