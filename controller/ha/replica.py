"""This daemon as one replica: its lock or lease, its heartbeat, and what it records when leadership moves.

On PostgreSQL any number of daemons may run; one leads (reconciles, calls providers) and the others stand
by (serve health, metrics, status and webhooks; take over when the lease expires). On SQLite one daemon
owns the file (a file lock) and leads through the same lease, so status and events read the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from clocks import Clock
from controller.ha.elector import LeaderElector, LeadershipChange
from controller.ha.file_lock import SqliteDaemonLock, sqlite_path
from controller.ha.lease import GLOBAL_LEASE, Identity, renew_interval
from controller.ha.lease_store import LeaseStore, lease_of
from controller.ha.replica_view import ReplicaSeen, ReplicaView
from controller.store.errors import one_line
from controller.store.models import EventRecord, LeaderLeaseRecord, ReplicaRecord

log = logging.getLogger("scalectl.ha")
__all__ = ["Replica", "ReplicaView", "read_replicas"]


class Replica:
    def __init__(
        self,
        engine: Engine,
        database_url: str,
        ttl: float,
        wall: Clock,
        *,
        stamp: Callable[[], float],
        http: str = "",
    ) -> None:
        """``wall`` measures the lease (real seconds); ``stamp`` dates the events (the daemon's clock)."""
        self.engine = engine
        self.me = Identity.of_this_process()
        self.wall = wall
        self.stamp = stamp
        self.http = http
        self.leases = LeaseStore(engine, ttl, wall.now)
        self.elector = LeaderElector(self.leases, self.me, wall, self._record)
        path = sqlite_path(database_url)
        self.file_lock = SqliteDaemonLock(path) if path is not None else None
        self.started_at = wall.now()

    @property
    def interval(self) -> float:
        return renew_interval(self.leases.ttl)

    def start(self) -> None:
        """Refuses to start (DaemonAlreadyRunning) where another daemon owns the SQLite file."""
        if self.file_lock is not None:
            self.file_lock.acquire()
        # The lease is first tried when the scheduler starts (the daemon's elect job), not here: a term
        # won during start-up would be half spent before the first tick.

    def step(self) -> None:
        self.elector.step()
        try:
            self.leases.heartbeat(self.me, self.started_at, self.http)
        except Exception as exc:  # a missed heartbeat only makes status stale; the lease decides
            log.warning("replica heartbeat failed: %s", one_line(exc))

    def is_leader(self) -> bool:
        return self.elector.is_leader()

    @property
    def epoch(self) -> int | None:
        return self.elector.term.epoch if self.elector.term is not None else None

    def stop(self) -> None:
        self.elector.release()
        try:
            self.leases.leave(self.me)
        except Exception as exc:
            log.warning("could not remove this replica's row: %s", exc)
        if self.file_lock is not None:
            self.file_lock.release()

    def view(self) -> ReplicaView:
        return read_replicas(self.engine)

    def _record(self, change: LeadershipChange) -> None:
        with Session(self.engine) as s, s.begin():
            s.add(EventRecord(t=self.stamp(), tier=None, instance_key=None, kind=change.kind, message=change.message))


def read_replicas(engine: Engine) -> ReplicaView:
    """The lease and every replica's heartbeat, as stored (for status; no lease rules applied)."""
    with Session(engine) as s:
        rows = [
            ReplicaSeen(r.holder, r.host, r.pid, r.started_at, r.seen_at, r.http)
            for r in s.scalars(select(ReplicaRecord).order_by(ReplicaRecord.started_at))
        ]
        lease = s.get(LeaderLeaseRecord, GLOBAL_LEASE)
        return ReplicaView(lease_of(lease) if lease is not None else None, rows)
