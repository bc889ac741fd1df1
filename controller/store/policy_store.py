"""Each tier's persisted policy state (what its policy learned and last desired), and the demand history the
forecasts are seeded from."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.models import DecisionRecord, PolicyStateRecord
from scalectl.controller.store.unit_of_work import save_policy_state
from scalectl.policies.types import PolicyState


class PolicyStateStore:
    def __init__(self, sessions: sessionmaker[Session]):
        self.sessions = sessions

    def states(self) -> dict[str, tuple[PolicyState, int]]:
        with self.sessions() as s:
            rows = s.scalars(select(PolicyStateRecord)).all()
            return {r.tier: (PolicyState.from_dict(r.state), r.desired) for r in rows}

    @staticmethod
    def save(session: Session, tier: str, state: PolicyState, desired: int, now: float) -> None:
        save_policy_state(session, tier, state, desired, now)

    def demand_samples(self, since: float) -> Sequence[tuple[str, float, float]]:
        """(tier, t, demand) recorded since ``since``, oldest first: seeds the seasonal forecast history."""
        with self.sessions() as s:
            q = (
                select(DecisionRecord.tier, DecisionRecord.t, DecisionRecord.demand)
                .where(DecisionRecord.t >= since, DecisionRecord.demand.is_not(None))
                .order_by(DecisionRecord.t)
            )
            return [(tier, t, float(d)) for tier, t, d in s.execute(q).all() if d is not None]
