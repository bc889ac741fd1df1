"""What `scalectl rollout` set per tier, and the facts a rollout step reads about the servers instances run."""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.instances import LIVE_STATES
from scalectl.controller.store.models import EventRecord, InstanceRecord, RolloutRecord
from scalectl.domain.instance import InstanceState
from scalectl.domain.rollout import RolloutControl


class RolloutStore:
    """``sole_writer``: nothing else writes the database (the simulator), so the controls are read once and kept
    until this object changes them."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], *, sole_writer: bool = False):
        self.engine = engine
        self.sessions = sessions
        self.sole_writer = sole_writer
        self._cache: dict[str, RolloutControl] | None = None

    def controls(self) -> dict[str, RolloutControl]:
        """Per tier, what `scalectl rollout` set (tiers never touched have no entry: generation 0, running)."""
        if self.sole_writer and self._cache is not None:
            return dict(self._cache)
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            rows = conn.execute(select(RolloutRecord.tier, RolloutRecord.generation, RolloutRecord.paused)).all()
        controls = {tier: RolloutControl(generation, bool(paused)) for tier, generation, paused in rows}
        self._cache = controls if self.sole_writer else None
        return dict(controls)

    def set(self, tier: str, now: float, *, restart: bool = False, paused: bool | None = None) -> RolloutControl:
        """`scalectl rollout restart|pause|resume`: a new generation (every instance drifts) and/or the pause
        flag; recorded as an event."""
        self._cache = None
        with self.sessions.begin() as s:
            row = s.get(RolloutRecord, tier)
            if row is None:
                row = RolloutRecord(tier=tier, generation=0, paused=False, updated_at=now)
                s.add(row)
            if restart:
                row.generation += 1
            if paused is not None:
                row.paused = paused
            row.updated_at = now
            what = "restart" if restart else ("paused" if paused else "resumed")
            s.add(
                EventRecord(
                    t=now, tier=tier, kind=f"rollout-{what}", message=f"rollout {what} (generation {row.generation})"
                )
            )
            return RolloutControl(row.generation, row.paused)

    def failed_with_server(self, tier: str, server: str) -> str | None:
        """The key of an instance of ``tier`` launched with ``server`` that failed, if any."""
        i = InstanceRecord
        query = select(i.key).where(i.tier == tier, i.server_hash == server, i.state == InstanceState.FAILED.value)
        with self.sessions() as s:
            return s.scalars(query.limit(1)).first()

    def server_hashes(self, tier: str) -> dict[str | None, int]:
        """How many live instances of ``tier`` run each server (``None``: launched before hashes were kept)."""
        i = InstanceRecord
        with self.sessions() as s:
            rows = s.execute(
                select(i.server_hash, func.count())
                .where(i.tier == tier, i.state.in_(LIVE_STATES))
                .group_by(i.server_hash)
            ).all()
        return {h: int(n) for h, n in rows}
