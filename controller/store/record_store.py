"""What the controller recorded: decisions, events and per-minute request counts, newest kept, oldest pruned."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.models import DecisionRecord, EventRecord, TierRequestsRecord

R = TypeVar("R", DecisionRecord, EventRecord)

REQUEST_COUNTS_KEPT = 86400.0  # seconds of per-minute request counts kept (the last hour is what is read)


class RecordStore:
    def __init__(self, sessions: sessionmaker[Session]):
        self.sessions = sessions

    def decisions(self, tier: str | None = None, limit: int = 50, since: float | None = None) -> list[DecisionRecord]:
        return self._recent(DecisionRecord, tier, limit, since)

    def events(self, tier: str | None = None, limit: int = 50, since: float | None = None) -> list[EventRecord]:
        return self._recent(EventRecord, tier, limit, since)

    def _recent(self, model: type[R], tier: str | None, limit: int, since: float | None) -> list[R]:
        """The newest ``limit`` rows (of one tier, since a time), returned oldest first."""
        with self.sessions() as s:
            q = select(model)
            if tier is not None:
                q = q.where(model.tier == tier)
            if since is not None:
                q = q.where(model.t >= since)
            rows = s.scalars(q.order_by(model.t.desc(), model.id.desc()).limit(limit)).all()
            return list(reversed(rows))

    def prune(self, before: float) -> int:
        """Drop decisions and events older than ``before`` (retention); instances are kept. Request counts
        are kept a day at most: only the last hour's are ever read."""
        with self.sessions.begin() as s:
            removed = 0
            for model in (DecisionRecord, EventRecord):
                result: Any = s.execute(delete(model).where(model.t < before))
                removed += int(result.rowcount or 0)
            oldest = int(max(before, self._newest_minute(s) * 60.0 - REQUEST_COUNTS_KEPT) // 60)
            result = s.execute(delete(TierRequestsRecord).where(TierRequestsRecord.minute < oldest))
            return removed + int(result.rowcount or 0)

    @staticmethod
    def _newest_minute(s: Session) -> int:
        return int(s.scalar(select(func.max(TierRequestsRecord.minute))) or 0)

    def requests_by_minute(self, start: float, end: float) -> dict[str, dict[int, float]]:
        """Per tier, the requests its signals counted in each minute of [start, end)."""
        rows = TierRequestsRecord
        first, last = int(start // 60), int(end // 60)
        found: dict[str, dict[int, float]] = {}
        with self.sessions() as s:
            query = select(rows.tier, rows.minute, rows.requests).where(rows.minute >= first, rows.minute < last)
            for tier, minute, requests in s.execute(query):
                found.setdefault(tier, {})[minute] = requests
        return found
