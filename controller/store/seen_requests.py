"""The shared memory of accepted webhook requests: claim a digest once, across every daemon of a store.

A digest is claimed by inserting its row; the primary key makes a second claim fail in the database,
so two daemons racing on the same replay cannot both win. Rows older than ``keep_for`` are deleted on
each claim: the table holds at most the requests of one freshness window (signatures older than that
are refused by their timestamp anyway), which bounds it.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.models import WebhookSeen


class SeenRequests:
    def __init__(self, sessions: sessionmaker[Session], keep_for: float):
        self.sessions = sessions
        self.keep_for = keep_for

    def claim(self, digest: str, now: float) -> bool:
        """True the first time ``digest`` is seen (within ``keep_for``); False for a replay."""
        with self.sessions.begin() as s:
            s.execute(delete(WebhookSeen).where(WebhookSeen.seen_at < now - self.keep_for))
        try:
            with self.sessions.begin() as s:
                s.add(WebhookSeen(digest=digest, seen_at=now))
        except IntegrityError:
            return False
        return True

    def release(self, digest: str) -> None:
        """Forget a claim whose request was not acted on (the daemon was starting): its retry is no replay."""
        with self.sessions.begin() as s:
            s.execute(delete(WebhookSeen).where(WebhookSeen.digest == digest))
