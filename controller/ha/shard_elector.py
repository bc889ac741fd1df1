"""One daemon's side of sharded leadership: a lease per tier (and one for housekeeping) instead of one
global lease, so several daemons split the tiers between them.

``step(wanted)`` runs every ``renew_interval(ttl)`` seconds: it renews every held lease in one statement,
works out from the live replicas which leases this daemon should hold (``shards.owner_of``), hands back
those that belong elsewhere now (a daemon joined) and takes those that are free and belong here (a
daemon left, or its tier is new). A reconcile tick acts inside a *scope* — the leases held when it began:
``check`` (before each provider call) and ``fence`` (before each commit) hold it to exactly those terms,
so a tier handed over or taken away mid-tick gets no further commit or provider call from this daemon.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from scalectl.clocks import Clock
from scalectl.controller.ha.elector import LeadershipChange
from scalectl.controller.ha.lease import Identity, LeadershipLost, Term
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.ha.shards import HOUSEKEEPING, TickScope, owner_of, tier_lease, tier_of_lease
from scalectl.controller.store.errors import one_line

log = logging.getLogger("scalectl.ha")


class ShardElector:
    def __init__(
        self,
        leases: LeaseStore,
        me: Identity,
        clock: Clock,
        on_change: Callable[[LeadershipChange], None] = lambda _change: None,
    ) -> None:
        self.leases = leases
        self.me = me
        self.clock = clock
        self.on_change = on_change
        self.terms: dict[str, Term] = {}  # lease name -> our term; replaced whole, never mutated in place
        self._scope: dict[str, Term] | None = None  # the running tick's leases (name -> term at its start)
        # The step runs in a worker thread while a tick may begin in the event loop: a lease is handed back
        # only if no running tick began on it (the two decide under this lock).
        self._scoping = threading.Lock()

    # ---- the periodic step -------------------------------------------------------------------------
    def step(self, tiers: Iterable[str], members: Iterable[str] | None) -> None:
        """``tiers``: every tier that needs an owner (configured, or still has instances); ``members``: the
        live sharding replicas, None when they could not be read (then leases are renewed, none move).
        A lease a running tick began on is handed back at a later step, once that tick has ended."""
        sent = self.clock.monotonic()
        self._renew(sent)
        if members is None:
            return
        # Our own heartbeat may have failed or be late: we are here all the same.
        members = sorted({*members, self.me.holder})
        wanted = {HOUSEKEEPING, *(tier_lease(t) for t in tiers)}
        mine = {name for name in wanted if owner_of(name, members) == self.me.holder}
        self._hand_back(mine)
        for name in sorted(mine - set(self.terms)):
            try:
                term = self.leases.try_acquire(self.me, sent, name=name)
            except SQLAlchemyError as exc:
                log.warning("could not take lease %r: %s", name, one_line(exc))
                return
            if term is not None:
                self.terms = {**self.terms, name: term}
                self._notify("leader_acquired", term, f"took {_what(name)} (epoch {term.epoch})")

    def _renew(self, sent: float) -> None:
        terms = self.terms
        if not terms:
            return
        try:
            kept = self.leases.renew_all(terms, self.me.holder, sent)
        except SQLAlchemyError as exc:
            mono = self.clock.monotonic()
            if all(t.valid(mono) for t in terms.values()):
                log.warning("lease renewal failed (%s); still acting until the renew deadline", one_line(exc))
                return
            self.terms = {}
            for term in terms.values():
                self._notify("leader_lost", term, f"could not renew within {term.renew_deadline:.1f}s")
            return
        self.terms = kept
        for name in sorted(set(terms) - set(kept)):
            self._notify("leader_lost", terms[name], "the lease was taken by another daemon")

    def _hand_back(self, mine: set[str]) -> None:
        """Give up the leases that belong elsewhere now, except those a running tick acts on (next step)."""
        with self._scoping:
            busy = self._scope or {}
            leaving = {n: t for n, t in self.terms.items() if n not in mine and n not in busy}
            self.terms = {n: t for n, t in self.terms.items() if n not in leaving}
        for name, term in sorted(leaving.items()):
            try:
                self.leases.release(term)
            except SQLAlchemyError as exc:  # the next owner waits out the TTL instead
                log.warning("could not hand back lease %r: %s", name, one_line(exc))
            self._notify("leader_lost", term, "handed over: it belongs to another daemon now")

    def _notify(self, kind: str, term: Term, why: str) -> None:
        if kind == "leader_acquired":
            message = f"{self.me.host} pid {self.me.pid} {why}"
        else:
            message = f"{self.me.host} pid {self.me.pid} gave up {_what(term.name)} (epoch {term.epoch}): {why}"
        (log.info if kind == "leader_acquired" else log.warning)(message)
        try:
            self.on_change(LeadershipChange(kind, term.epoch, message))
        except DBAPIError as exc:
            log.warning("could not record the leadership change: %s", one_line(exc))
        except Exception:  # recording the event must not change who acts
            log.exception("could not record the leadership change")

    # ---- what the rest of the daemon asks -----------------------------------------------------------
    @property
    def term(self) -> Term | None:
        """The housekeeping term (what `scalectl_leader` and the epoch in status report)."""
        return self.terms.get(HOUSEKEEPING)

    def owned_tiers(self) -> list[str]:
        mono = self.clock.monotonic()
        return sorted(t for n, term in self.terms.items() if (t := tier_of_lease(n)) is not None and term.valid(mono))

    def is_leader(self) -> bool:
        """Holds a valid lease on anything: this daemon reconciles (some tiers, or housekeeping)."""
        mono = self.clock.monotonic()
        return any(term.valid(mono) for term in self.terms.values())

    def housekeeper(self) -> bool:
        term = self.term
        return term is not None and term.valid(self.clock.monotonic())

    def begin_tick(self) -> TickScope:
        mono = self.clock.monotonic()
        with self._scoping:
            scope = {n: t for n, t in self.terms.items() if t.valid(mono)}
            self._scope = scope
        tiers = frozenset(t for n in scope if (t := tier_of_lease(n)) is not None)
        return TickScope(tiers, HOUSEKEEPING in scope)

    def end_tick(self) -> None:
        with self._scoping:
            self._scope = None

    def check(self) -> dict[str, Term]:
        """Before a provider call: every lease of the running tick is still ours and within its deadline."""
        scope = self._scope
        if not scope:
            raise LeadershipLost("no tick is running on leases of this daemon")
        terms, mono = self.terms, self.clock.monotonic()
        for name, began in scope.items():
            term = terms.get(name)
            if term is None or term.epoch != began.epoch:
                raise LeadershipLost(f"{_what(name)} was given up during this tick")
            if not term.valid(mono):
                raise LeadershipLost(f"{_what(name)} may have ended: not renewed within its deadline")
        return scope

    def fence(self, session: Session) -> None:
        """Before a commit: the running tick's leases are all still ours, and the store agrees."""
        self.leases.fence_all(session, self.check())

    def release(self) -> None:
        terms, self.terms = self.terms, {}
        try:
            self.leases.release_all(terms)
        except SQLAlchemyError as exc:
            log.warning("could not release the leases (others wait out their TTL): %s", one_line(exc))
            return
        if terms:
            log.info("released %d leases on shutdown", len(terms))


def _what(lease: str) -> str:
    tier = tier_of_lease(lease)
    return f"tier {tier}" if tier is not None else "housekeeping"
