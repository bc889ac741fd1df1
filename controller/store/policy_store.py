"""Each tier's persisted policy state (what its policy learned and last desired), and the demand history the
forecasts are seeded from."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.deferred_states import DeferredStates
from scalectl.controller.store.models import DecisionRecord, PolicyStateRecord
from scalectl.controller.store.unit_of_work import save_policy_state
from scalectl.policies.types import PolicyState


class PolicyStateStore:
    def __init__(self, sessions: sessionmaker[Session], deferred: DeferredStates | None = None):
        """``deferred``: a sole writer's committed states not written yet (``DeferredStates``); every read
        here writes them first."""
        self.sessions = sessions
        self.deferred = deferred

    def write_deferred(self) -> None:
        """Write the states a sole writer holds back (before a read, or for a run's store to hold them)."""
        if self.deferred is not None and self.deferred.held:
            with self.sessions() as s:
                self.deferred.write(s)
                s.commit()

    def states(self) -> dict[str, tuple[PolicyState, int]]:
        self.write_deferred()
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
