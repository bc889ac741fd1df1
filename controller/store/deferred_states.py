"""Each tier's policy state as last committed, written to the table only when something reads it.

Only the simulator's private database qualifies (``Store(sole_writer=True)``): nothing but this process reads
the table, and it reads it only through ``PolicyStateStore``, which writes what is held first. Each save
was an UPDATE of the whole state as JSON (its minute and quarter-hour bins), a tenth of a simulated day;
a day ends with one per tier. The daemon's store writes at once: a restart, `scalectl status` and a second
daemon read the table."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from scalectl.controller.store.unit_of_work import save_policy_state
from scalectl.policies.types import PolicyState


@dataclass(slots=True)
class DeferredStates:
    # tier -> (state, desired, when it was saved): the newest committed save of each tier not yet written
    held: dict[str, tuple[PolicyState, int, float]] = field(default_factory=dict)

    def committed(self, saves: dict[str, tuple[PolicyState, int, float]]) -> None:
        """A unit of work committed these saves (the newest of each tier)."""
        self.held.update(saves)

    def write(self, session: Session) -> bool:
        """Write what is held on ``session`` (the caller commits); whether there was anything."""
        if not self.held:
            return False
        for tier, (state, desired, at) in self.held.items():
            save_policy_state(session, tier, state, desired, at)
        self.held.clear()
        return True
