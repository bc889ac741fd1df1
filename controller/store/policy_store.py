"""Each tier's persisted policy state (what its policy learned and last desired)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.deferred_states import DeferredStates
from scalectl.controller.store.models import PolicyStateRecord
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
