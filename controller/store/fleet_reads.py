"""The fleet as the read models see it: live instances and what they billed, with the tier specs, policy states
and request counts a status document is built from (``scalectl.controller.views.status.FleetReads``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.config_store import ConfigStore
from scalectl.controller.store.instances import LIVE_STATES, live_groups_query
from scalectl.controller.store.models import InstanceRecord
from scalectl.controller.store.policy_store import PolicyStateStore
from scalectl.controller.store.record_store import RecordStore
from scalectl.controller.unit_cost import BilledSpan
from scalectl.policies.types import PolicyState


class FleetReadStore:
    def __init__(
        self,
        engine: Engine,
        sessions: sessionmaker[Session],
        config: ConfigStore,
        policy: PolicyStateStore,
        records: RecordStore,
    ):
        self.engine = engine
        self.sessions = sessions
        self._config, self._policy, self._records = config, policy, records

    def tier_specs(self) -> dict[str, dict[str, Any]]:
        return self._config.tier_specs()

    def policy_states(self) -> dict[str, tuple[PolicyState, int]]:
        return self._policy.states()

    def requests_by_minute(self, start: float, end: float) -> dict[str, dict[int, float]]:
        return self._records.requests_by_minute(start, end)

    def instances(
        self, tier: str | None = None, *, include_ended: bool = False, limit: int = 1000
    ) -> list[InstanceRecord]:
        with self.sessions() as s:
            q = select(InstanceRecord)
            if tier is not None:
                q = q.where(InstanceRecord.tier == tier)
            if not include_ended:
                q = q.where(InstanceRecord.state.in_(LIVE_STATES))
            return list(s.scalars(q.order_by(InstanceRecord.created_at.desc()).limit(limit)).all())

    def live_by_state(self, tiers: Collection[str] | None = None) -> list[tuple[str, str, int, float, float]]:
        """Live instances per (tier, state): how many, the $/hour they bill, the oldest ``created_at`` (the
        metrics after every tick; one grouped query however large the fleet). ``tiers``: only these."""
        with self.engine.connect() as conn:
            rows = conn.execute(live_groups_query(tiers=tiers)).all()
        return [(t, state, int(n), float(spend or 0.0), float(oldest)) for t, state, _surge, n, spend, oldest in rows]

    def live_tier_names(self) -> set[str]:
        """Tiers with an instance that may bill (a tier gone from the configuration still drains)."""
        with self.engine.connect() as conn:
            query = select(InstanceRecord.tier).where(InstanceRecord.state.in_(LIVE_STATES)).distinct()
            return set(conn.scalars(query))

    def instances_billed_since(self, start: float) -> list[BilledSpan]:
        """Every instance that billed at some point since ``start``: its tier, from when, until when (None:
        still billing) and at what $/hour."""
        i = InstanceRecord
        begun = func.coalesce(i.launched_at, i.created_at)
        with self.sessions() as s:
            rows = s.execute(
                select(i.tier, begun, i.ended_at, i.price_per_hour).where(
                    i.provider_id.is_not(None), (i.ended_at.is_(None)) | (i.ended_at >= start)
                )
            ).all()
        return [BilledSpan(tier, launched, ended, price) for tier, launched, ended, price in rows]
