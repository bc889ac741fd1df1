"""The lease row in the store: acquire, renew, release, and the fence every leader commit passes.

Each change is one conditional UPDATE (or the first INSERT), so two daemons racing for the same lease
cannot both win: the database serialises them and the loser's row count is 0. Times come from the
store's clock on PostgreSQL (``clock_timestamp()``), so daemons on different hosts agree on expiry; on
SQLite (one daemon per file, held by a file lock) the injected clock is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controller.ha.lease import GLOBAL_LEASE, Identity, LeadershipLost, Lease, Term
from controller.store.models import LeaderLeaseRecord, ReplicaRecord

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
    def try_acquire(self, me: Identity, sent_mono: float) -> Term | None:
        """Take the lease if it is free (absent or expired): a new epoch begins. None if someone holds it."""
        try:
            return self._try_acquire(me, sent_mono)
        except IntegrityError:  # another daemon inserted the first row at the same moment
            return None

    def _try_acquire(self, me: Identity, sent_mono: float) -> Term | None:
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            row = s.get(LeaderLeaseRecord, self.name)
            if row is None:
                s.execute(
                    insert(LeaderLeaseRecord).values(
                        name=self.name,
                        holder=me.holder,
                        host=me.host,
                        pid=me.pid,
                        epoch=1,
                        acquired_at=now,
                        renewed_at=now,
                        expires_at=now + self.ttl,
                    )
                )
                return Term(self.name, me.holder, 1, self.ttl, sent_mono, now)
            lease = lease_of(row)
            if not lease.expired(now) and not lease.held_by(me.holder):
                return None
            epoch = lease.epoch + 1
            won = _rows(
                s.execute(
                    update(LeaderLeaseRecord)
                    .where(LeaderLeaseRecord.name == self.name, LeaderLeaseRecord.epoch == lease.epoch)
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
            return Term(self.name, me.holder, epoch, self.ttl, sent_mono, now) if won == 1 else None

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

    # ---- fencing ---------------------------------------------------------------------------------
    def fence(self, session: Session, term: Term) -> None:
        """Inside the leader's transaction, before it commits: the lease must still be ours, same epoch.

        On PostgreSQL the row is read ``FOR SHARE``: a standby's takeover (an UPDATE of this row) waits
        until this transaction ends, so a commit either lands inside our term or not at all."""
        query = select(LeaderLeaseRecord.holder, LeaderLeaseRecord.epoch).where(LeaderLeaseRecord.name == term.name)
        if self._db_clock:
            query = query.with_for_update(read=True)
        row = session.execute(query).first()
        if row is None or row.holder != term.holder or row.epoch != term.epoch:
            holder = "nobody" if row is None else f"{row.holder} (epoch {row.epoch})"
            raise LeadershipLost(f"lease {term.name!r} is held by {holder}, not by us in epoch {term.epoch}")

    # ---- replicas --------------------------------------------------------------------------------
    def heartbeat(self, me: Identity, started_at: float, http: str = "") -> None:
        """Every daemon says it is alive, leader or not (shown by `scalectl status`)."""
        with Session(self.engine) as s, s.begin():
            now = self.now(s)
            row = s.get(ReplicaRecord, me.holder)
            if row is None:
                s.add(
                    ReplicaRecord(
                        holder=me.holder, host=me.host, pid=me.pid, started_at=started_at, seen_at=now, http=http
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
