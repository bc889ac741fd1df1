"""One daemon's side of the election: renew while leading, try to take over while standing by.

``step()`` is called every ``renew_interval(ttl)`` seconds (the daemon schedules it). The reconcile tick
runs only while ``is_leader()``; ``check()`` is what the reconciler calls before every provider call and
``fence`` what the unit of work calls before every commit. A leader whose renewal fails (database down,
connection cut, lease taken) keeps acting only until its renew deadline, then steps down and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from scalectl.clocks import Clock
from scalectl.controller.ha.lease import Identity, LeadershipLost, Term
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.store.errors import one_line

log = logging.getLogger("scalectl.ha")


@dataclass(frozen=True)
class LeadershipChange:
    """An event worth recording: ``kind`` is ``leader_acquired`` or ``leader_lost``."""

    kind: str
    epoch: int
    message: str


class LeaderElector:
    def __init__(
        self,
        leases: LeaseStore,
        me: Identity,
        clock: Clock,
        on_change: Callable[[LeadershipChange], None] = lambda _change: None,
    ) -> None:
        self.leases = leases
        self.me = me
        self.clock = clock  # the real clock: terms are measured in real seconds, also in a sped-up demo
        self.on_change = on_change
        self.term: Term | None = None

    # ---- the periodic step -------------------------------------------------------------------------
    def step(self) -> None:
        sent = self.clock.monotonic()
        if self.term is not None:
            self._renew(self.term, sent)
        else:
            self._acquire(sent)

    def _renew(self, term: Term, sent: float) -> None:
        try:
            renewed = self.leases.renew(term, sent)
        except SQLAlchemyError as exc:
            if term.valid(self.clock.monotonic()):
                log.warning("lease renewal failed (%s); still leader until the renew deadline", _short(exc))
                return
            self._lose(term, f"could not renew the lease within {term.renew_deadline:.1f}s ({_short(exc)})")
            return
        if renewed is None:
            self._lose(term, "the lease was taken by another daemon")
        elif not term.valid(sent):
            # Renewed, but only after our deadline: we may have been unsure for a while. Keep going —
            # nobody else acted (the epoch is unchanged) — and say so.
            log.warning("lease renewed after its deadline (epoch %d): the store was slow or we were paused", term.epoch)
            self.term = renewed
        else:
            self.term = renewed

    def _acquire(self, sent: float) -> None:
        try:
            term = self.leases.try_acquire(self.me, sent)
        except SQLAlchemyError as exc:
            log.warning("lease acquisition failed: %s", _short(exc))
            return
        if term is None:
            return
        self.term = term
        message = f"{self.me.host} pid {self.me.pid} became leader (epoch {term.epoch})"
        log.info(message)
        self._notify(LeadershipChange("leader_acquired", term.epoch, message))

    def _lose(self, term: Term, why: str) -> None:
        self.term = None
        message = f"{self.me.host} pid {self.me.pid} stepped down from epoch {term.epoch}: {why}"
        log.warning(message)
        self._notify(LeadershipChange("leader_lost", term.epoch, message))

    def _notify(self, change: LeadershipChange) -> None:
        try:
            self.on_change(change)
        except DBAPIError as exc:  # the store is away: that is why leadership changed; one line
            log.warning("could not record the leadership change: %s", one_line(exc))
        except Exception:  # recording the event must not change who leads
            log.exception("could not record the leadership change")

    # ---- what the rest of the daemon asks -----------------------------------------------------------
    def is_leader(self) -> bool:
        return self.term is not None and self.term.valid(self.clock.monotonic())

    def check(self) -> Term:
        """Before a provider call: the term, or LeadershipLost (and a step down) if it may have ended."""
        term = self.term
        if term is None:
            raise LeadershipLost("this daemon is a standby")
        if not term.valid(self.clock.monotonic()):
            self._lose(term, f"no successful renewal for {term.renew_deadline:.1f}s (paused or cut off)")
            raise LeadershipLost(f"term {term.epoch} may have ended: not renewed within its deadline")
        return term

    def fence(self, session: Session) -> None:
        """Before a commit: still leader locally, and the store agrees (same holder, same epoch)."""
        term = self.check()
        try:
            self.leases.fence(session, term)
        except LeadershipLost as exc:
            self._lose(term, str(exc))
            raise

    def release(self) -> None:
        term, self.term = self.term, None
        if term is None:
            return
        try:
            self.leases.release(term)
        except SQLAlchemyError as exc:
            log.warning("could not release the lease (standbys wait out its TTL): %s", _short(exc))
            return
        log.info("released the lease (epoch %d) on shutdown", term.epoch)


def _short(exc: BaseException) -> str:
    return one_line(exc)
