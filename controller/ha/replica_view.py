"""What `scalectl status` and /v1/status show about the replicas, as plain data: no SQLAlchemy here, so
`scalectl status` on SQLite reads it without importing the ORM (controller.views.status_reads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scalectl.controller.ha.lease import Lease


@dataclass(frozen=True)
class ReplicaSeen:
    """One replica's heartbeat row."""

    holder: str
    host: str
    pid: int
    started_at: float
    seen_at: float
    http: str
    sharded: bool = False


@dataclass(frozen=True)
class ReplicaView:
    """The lease and every replica's heartbeat, as stored (no lease rules applied)."""

    leader: Lease | None
    replicas: list[ReplicaSeen]
    tier_leases: list[Lease] = field(default_factory=list)  # sharded: one per tier, whoever holds it
