"""Failures the store recorded: the history the reconciler's back-offs are rebuilt from, and interruption
notices from webhooks."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.history import failure_history
from scalectl.controller.store.instances import LIVE_STATES
from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.domain.failures import FailureHistory


class NoticeMismatch(ValueError):
    """An interruption notice whose provider account or instance id is not the named instance's."""


class FailureStore:
    def __init__(self, sessions: sessionmaker[Session]):
        self.sessions = sessions

    def history(self, since: float) -> FailureHistory:
        """Interruptions, refused creates and create back-offs the store recorded: what the reconciler's
        back-offs are rebuilt from when the daemon starts."""
        with self.sessions() as s:
            return failure_history(s, since)

    def mark_notice(self, provider: str, provider_id: str | None, key: str | None, now: float) -> str | None:
        """Record an interruption notice from a webhook; returns the instance key it matched, if any.

        A notice naming an instance (by key) of another provider account, or another provider id
        than the instance has, changes nothing and raises NoticeMismatch."""
        with self.sessions.begin() as s:
            q = select(InstanceRecord).where(InstanceRecord.state.in_(LIVE_STATES))
            if key:
                q = q.where(InstanceRecord.key == key)
            elif provider_id:
                q = q.where(InstanceRecord.provider == provider, InstanceRecord.provider_id == provider_id)
            else:
                return None
            row = s.scalars(q).first()
            if row is None:
                return None
            if row.provider != provider or (provider_id and row.provider_id and row.provider_id != provider_id):
                raise NoticeMismatch(
                    f"the notice names {provider} {provider_id or ''}".rstrip()
                    + f" but instance {row.key} is {row.provider} {row.provider_id or '(not created yet)'}"
                )
            if row.notice_at is None:
                row.notice_at = now
                s.add(
                    EventRecord(
                        t=now,
                        tier=row.tier,
                        instance_key=row.key,
                        kind="interruption-notice",
                        message=f"{provider} warned that {row.provider_id} will be reclaimed",
                    )
                )
            return row.key
