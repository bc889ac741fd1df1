"""The lease row in the store: acquire, renew, release, and the fence every leader commit passes.

Each change is one conditional UPDATE (or the first INSERT), so two daemons racing for the same lease
cannot both win: the database serialises them and the loser's row count is 0. Times come from the
store's clock on PostgreSQL (``clock_timestamp()``), so daemons on different hosts agree on expiry; on
SQLite (one daemon per file, held by a file lock) the injected clock is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scalectl.controller.ha.lease import GLOBAL_LEASE, Identity, LeadershipLost, Lease, Term
from scalectl.controller.store.models import LeaderLeaseRecord, ReplicaRecord

log = logging.getLogger(__name__)


class LeaseStore:
    def __init__(self, engine: Engine, ttl: float, wall: Callable[[], float], *, name: str = GLOBAL_LEASE) -> None:
        if ttl <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl}")
        self.engine = engine
        self.ttl = ttl
        self.name = name
        self._wall = wall
        self._db_clock = engine.dialect.name == "postgresql"

    # ---- time ------------------------------------------------------------------------------------
    def now(self, session: Session) -> float:
        """The store's clock where several daemons share it; else the injected one."""
        if self._db_clock:
            return float(session.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
        return self._wall()

    # ---- reading ---------------------------------------------------------------------------------
    def read(self) -> Lease | None:
        with Session(self.engine) as s:
            row = s.get(LeaderLeaseRecord, self.name)
            return lease_of(row) if row is not None else None

    # ---- changing --------------------------------------------------------------------------------
    def try_acquire(self, me: Identity, sent_mono: float, *, name: str | None = None) -> Term | None:
        """Take the lease (this store's, or ``name``) if it is free (absent or expired): a new epoch
        begins. None if someone holds it."""
        try:
            return self._try_acquire(name or self.name, me, sent_mono)
        except IntegrityError:  # another daemon inserted the first row at the same moment
            return None

    def _try_acquire(self, name: str, me: Identity, sent_mono: float) -> Term | None:
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            row = s.get(LeaderLeaseRecord, name)
            if row is None:
                s.execute(
                    insert(LeaderLeaseRecord).values(
                        name=name,
                        holder=me.holder,
                        host=me.host,
                        pid=me.pid,
                        epoch=1,
                        acquired_at=now,
                        renewed_at=now,
                        expires_at=now + self.ttl,
                    )
                )
                return Term(name, me.holder, 1, self.ttl, sent_mono, now)
            lease = lease_of(row)
            if not lease.expired(now) and not lease.held_by(me.holder):
                return None
            epoch = lease.epoch + 1
            won = _rows(
                s.execute(
                    update(LeaderLeaseRecord)
                    .where(LeaderLeaseRecord.name == name, LeaderLeaseRecord.epoch == lease.epoch)
                    .values(
                        holder=me.holder,
                        host=me.host,
                        pid=me.pid,
                        epoch=epoch,
                        acquired_at=now,
                        renewed_at=now,
                        expires_at=now + self.ttl,
                    )
                    .execution_options(synchronize_session=False)
                )
            )
            return Term(name, me.holder, epoch, self.ttl, sent_mono, now) if won == 1 else None

    def renew(self, term: Term, sent_mono: float) -> Term | None:
        """Extend our own term; None if the lease moved on (another holder or epoch): we were deposed.

        A lease that expired while nobody took it may still be renewed: no other daemon acted, since
        acting needs a new epoch."""
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            kept = _rows(
                s.execute(
                    update(LeaderLeaseRecord)
                    .where(
                        LeaderLeaseRecord.name == term.name,
                        LeaderLeaseRecord.holder == term.holder,
                        LeaderLeaseRecord.epoch == term.epoch,
                    )
                    .values(renewed_at=now, expires_at=now + self.ttl)
                    .execution_options(synchronize_session=False)
                )
            )
        return term.renewed(sent_mono) if kept == 1 else None

    def release(self, term: Term) -> None:
        """A clean stop hands the lease over at once instead of making standbys wait out the TTL."""
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            s.execute(
                update(LeaderLeaseRecord)
                .where(
                    LeaderLeaseRecord.name == term.name,
                    LeaderLeaseRecord.holder == term.holder,
                    LeaderLeaseRecord.epoch == term.epoch,
                )
                .values(expires_at=now)
                .execution_options(synchronize_session=False)
            )

    # ---- many leases at once (tiers sharded between daemons) -------------------------------------------
    def renew_all(self, terms: Mapping[str, Term], holder: str, sent_mono: float) -> dict[str, Term]:
        """Extend every term we hold in one statement; returns those still ours in the same epoch (a term
        missing from the answer was taken over: we were deposed from that lease)."""
        if not terms:
            return {}
        names = sorted(terms)
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            if self._db_clock:  # rows locked in name order, as the fence does: the two never deadlock
                lock = select(LeaderLeaseRecord.name).where(LeaderLeaseRecord.name.in_(names))
                s.execute(lock.order_by(LeaderLeaseRecord.name).with_for_update())
            s.execute(
                update(LeaderLeaseRecord)
                .where(LeaderLeaseRecord.name.in_(names), LeaderLeaseRecord.holder == holder)
                .values(renewed_at=now, expires_at=now + self.ttl)
                .execution_options(synchronize_session=False)
            )
            held = s.execute(
                select(LeaderLeaseRecord.name, LeaderLeaseRecord.epoch).where(
                    LeaderLeaseRecord.name.in_(names), LeaderLeaseRecord.holder == holder
                )
            ).all()
        return {row.name: terms[row.name].renewed(sent_mono) for row in held if row.epoch == terms[row.name].epoch}

    def release_all(self, terms: Mapping[str, Term]) -> None:
        for term in terms.values():
            self.release(term)

    def fence_all(self, session: Session, terms: Mapping[str, Term]) -> None:
        """``fence`` for several leases in one query: every one must still be ours, in its epoch."""
        if not terms:
            return
        query = select(LeaderLeaseRecord.name, LeaderLeaseRecord.holder, LeaderLeaseRecord.epoch).where(
            LeaderLeaseRecord.name.in_(sorted(terms))
        )
        if self._db_clock:  # in name order, like renew_all's lock
            query = query.order_by(LeaderLeaseRecord.name)
            query = query.with_for_update(read=True)
        rows = {row.name: row for row in session.execute(query)}
        for name, term in terms.items():
            row = rows.get(name)
            if row is None or row.holder != term.holder or row.epoch != term.epoch:
                holder = "nobody" if row is None else f"{row.holder} (epoch {row.epoch})"
                raise LeadershipLost(f"lease {name!r} is held by {holder}, not by us in epoch {term.epoch}")

    def members(self) -> dict[str, bool]:
        """Replicas whose heartbeat is younger than one TTL (store clock) -> whether each shards tiers."""
        with Session(self.engine) as s:
            now = self.now(s)
            rows = s.execute(
                select(ReplicaRecord.holder, ReplicaRecord.sharded).where(ReplicaRecord.seen_at > now - self.ttl)
            )
            return {row.holder: bool(row.sharded) for row in rows}

    # ---- fencing ---------------------------------------------------------------------------------
    def fence(self, session: Session, term: Term) -> None:
        """Inside the leader's transaction, before it commits: the lease must still be ours, same epoch.

        On PostgreSQL the row is read ``FOR SHARE``: a standby's takeover (an UPDATE of this row) waits
        until this transaction ends, so a commit either lands inside our term or not at all."""
        self.fence_all(session, {term.name: term})

    # ---- replicas --------------------------------------------------------------------------------
    def heartbeat(self, me: Identity, started_at: float, http: str = "", *, sharded: bool = False) -> None:
        """Every daemon says it is alive, leader or not (shown by `scalectl status`)."""
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            row = s.get(ReplicaRecord, me.holder)
            if row is None:
                s.add(
                    ReplicaRecord(
                        holder=me.holder,
                        host=me.host,
                        pid=me.pid,
                        started_at=started_at,
                        seen_at=now,
                        http=http,
                        sharded=sharded,
                    )
                )
            else:
                row.seen_at = now
            # Rows of daemons gone for a long while are history, not replicas.
            s.execute(delete(ReplicaRecord).where(ReplicaRecord.seen_at < now - 100 * self.ttl))

    def leave(self, me: Identity) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(delete(ReplicaRecord).where(ReplicaRecord.holder == me.holder))


def lease_of(row: LeaderLeaseRecord) -> Lease:
    return Lease(
        name=row.name,
        holder=row.holder,
        host=row.host,
        pid=row.pid,
        epoch=row.epoch,
        acquired_at=row.acquired_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
    )


def _rows(result: Any) -> int:
    """Rows an UPDATE changed: the whole point of a conditional update."""
    return int(cast(CursorResult[Any], result).rowcount or 0)
