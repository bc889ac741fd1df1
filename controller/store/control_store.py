"""What `scalectl scale` and `scalectl pause|resume` set per tier (``TierControl``): written by the CLI,
read by the reconciler every tick and by status and describe."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.models import EventRecord, TierControlRecord
from scalectl.domain.tier_control import TierControl


class ControlStore:
    """``sole_writer``: nothing else writes the database (the simulator), so the controls are read once and
    kept until this object changes them (the reconciler asks every tick)."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], *, sole_writer: bool = False):
        self.engine = engine
        self.sessions = sessions
        self.sole_writer = sole_writer
        self._cache: dict[str, TierControl] | None = None

    def controls(self) -> dict[str, TierControl]:
        """Per tier with a row, its controls (an expired override is still returned: ``override_at`` tells)."""
        if self.sole_writer and self._cache is not None:
            return dict(self._cache)
        r = TierControlRecord
        with self.engine.connect() as conn:  # a plain read, no ORM session: the reconciler asks every tick
            rows = conn.execute(select(r.tier, r.override_count, r.override_until, r.paused)).all()
        controls = {tier: TierControl(count, until, bool(paused)) for tier, count, until, paused in rows}
        self._cache = controls if self.sole_writer else None
        return dict(controls)

    def set_override(self, tier: str, count: int | None, until: float | None, now: float) -> TierControl:
        """`scalectl scale TIER N [--for D]` (``count`` None: `--clear`); recorded as an event."""
        control = TierControl(count, until if count is not None else None)
        message = "override cleared" if count is None else control.describe_override()
        return self._write(tier, now, "override", message, override=(count, control.override_until))

    def set_paused(self, tier: str, paused: bool, now: float) -> TierControl:
        """`scalectl pause|resume TIER`; recorded as an event."""
        what = "paused" if paused else "resumed"
        return self._write(tier, now, what, f"tier {what} (scalectl {'pause' if paused else 'resume'})", paused=paused)

    def _write(
        self,
        tier: str,
        now: float,
        kind: str,
        message: str,
        *,
        override: tuple[int | None, float | None] | None = None,
        paused: bool | None = None,
    ) -> TierControl:
        self._cache = None
        with self.sessions.begin() as s:
            row = s.get(TierControlRecord, tier)
            if row is None:
                row = TierControlRecord(tier=tier, paused=False, updated_at=now)
                s.add(row)
            if override is not None:
                row.override_count, row.override_until = override
            if paused is not None:
                row.paused = paused
            row.updated_at = now
            s.add(EventRecord(t=now, tier=tier, kind=kind, message=message))
            return TierControl(row.override_count, row.override_until, row.paused)
