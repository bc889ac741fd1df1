"""This daemon as one replica: its lock or lease, its heartbeat, and what it records when leadership moves.

On PostgreSQL any number of daemons may run; one leads (reconciles, calls providers) and the others stand
by (serve health, metrics, status and webhooks; take over when the lease expires). On SQLite one daemon
owns the file (a file lock) and leads through the same lease, so status and events read the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from scalectl.clocks import Clock
from scalectl.controller.ha.elector import LeaderElector, LeadershipChange
from scalectl.controller.ha.file_lock import SqliteDaemonLock, sqlite_path
from scalectl.controller.ha.lease import GLOBAL_LEASE, Identity, renew_interval
from scalectl.controller.ha.lease_store import LeaseStore, lease_of
from scalectl.controller.ha.replica_view import ReplicaSeen, ReplicaView
from scalectl.controller.ha.shard_elector import ShardElector
from scalectl.controller.ha.shards import TIER_LEASE_PREFIX, TickScope
from scalectl.controller.store.errors import one_line
from scalectl.controller.store.models import EventRecord, LeaderLeaseRecord, ReplicaRecord

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
        sharded: bool = False,
    ) -> None:
        """``wall`` measures the lease (real seconds); ``stamp`` dates the events (the daemon's clock).
        ``sharded``: a lease per tier (daemons split the tiers) instead of one leader for all."""
        self.engine = engine
        self.me = Identity.of_this_process()
        self.wall = wall
        self.stamp = stamp
        self.http = http
        self.sharded = sharded
        self.leases = LeaseStore(engine, ttl, wall.now)
        self.elector: LeaderElector | ShardElector = (
            ShardElector(self.leases, self.me, wall, self._record)
            if sharded
            else LeaderElector(self.leases, self.me, wall, self._record)
        )
        self.conflict: str | None = None  # set while replicas on this database disagree about sharding
        path = sqlite_path(database_url)
        self.file_lock = SqliteDaemonLock(path) if path is not None else None
        self.started_at = wall.now()
        self.store_error: str | None = None  # the last step's heartbeat could not reach the store (one line)

    @property
    def interval(self) -> float:
        return renew_interval(self.leases.ttl)

    def start(self) -> None:
        """Refuses to start (DaemonAlreadyRunning) where another daemon owns the SQLite file."""
        if self.file_lock is not None:
            self.file_lock.acquire()
        # The lease is first tried when the scheduler starts (the daemon's elect job), not here: a term
        # won during start-up would be half spent before the first tick.

    def step(self, tiers: Iterable[str] | None = ()) -> None:
        """Heartbeat, then renew or take leases. ``tiers`` (sharded only): the tiers that need an owner;
        None when they could not be read (leases are renewed, none change hands)."""
        try:
            self.leases.heartbeat(self.me, self.started_at, self.http, sharded=self.sharded)
        except Exception as exc:  # a missed heartbeat only makes status stale; the lease decides
            if self.store_error is None:
                log.warning("replica heartbeat failed: %s", one_line(exc))
            self.store_error = one_line(exc)
        else:
            if self.store_error is not None:
                log.info("replica heartbeat reaches the store again")
            self.store_error = None
        members = self._members()
        if members is not None and self._disagree(members):
            return
        if isinstance(self.elector, ShardElector):
            sharding = None if members is None or tiers is None else [h for h, on in members.items() if on]
            self.elector.step(tiers or (), sharding)
        else:
            self.elector.step()

    def _members(self) -> dict[str, bool] | None:
        try:
            return self.leases.members()
        except Exception as exc:
            log.warning("could not read the replicas: %s", one_line(exc))
            return None

    def _disagree(self, members: dict[str, bool]) -> bool:
        """A daemon that leads everything and daemons that split the tiers would both act on the same
        tiers: while both kinds are alive on this database, this one acts on nothing, and says so."""
        other = sorted(h for h, sharded in members.items() if sharded != self.sharded and h != self.me.holder)
        if not other:
            if self.conflict is not None:
                log.warning("replicas agree about sharding again; this daemon takes part in the election")
            self.conflict = None
            return False
        mine = "shards tiers" if self.sharded else "does not shard tiers"
        conflict = (
            f"this daemon {mine} but {', '.join(other)} does the opposite on the same database: acting on "
            "nothing until every daemon runs with the same SCALECTL_SHARD_TIERS"
        )
        if conflict != self.conflict:
            log.error(conflict)
        self.conflict = conflict
        self.elector.release()
        return True

    def is_leader(self) -> bool:
        """Acts on something: the whole fleet (one leader), or some tiers or the housekeeping (sharded)."""
        return self.elector.is_leader()

    def housekeeper(self) -> bool:
        """Prunes history and deletes orphans: the leader, or the holder of the housekeeping lease."""
        elector = self.elector
        return elector.housekeeper() if isinstance(elector, ShardElector) else elector.is_leader()

    def begin_tick(self) -> TickScope | None:
        """What the tick about to run may act on: everything (None) when one daemon leads."""
        return self.elector.begin_tick() if isinstance(self.elector, ShardElector) else None

    def end_tick(self) -> None:
        if isinstance(self.elector, ShardElector):
            self.elector.end_tick()

    def owned_tiers(self) -> list[str] | None:
        """The tiers this daemon acts on when sharded; None when it leads all of them or none."""
        return self.elector.owned_tiers() if isinstance(self.elector, ShardElector) else None

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
            ReplicaSeen(r.holder, r.host, r.pid, r.started_at, r.seen_at, r.http, r.sharded)
            for r in s.scalars(select(ReplicaRecord).order_by(ReplicaRecord.started_at))
        ]
        lease = s.get(LeaderLeaseRecord, GLOBAL_LEASE)
        tiers = s.scalars(select(LeaderLeaseRecord).where(LeaderLeaseRecord.name.startswith(TIER_LEASE_PREFIX)))
        return ReplicaView(lease_of(lease) if lease is not None else None, rows, [lease_of(t) for t in tiers])
