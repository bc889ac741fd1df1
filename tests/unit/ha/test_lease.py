"""Lease and fencing rules on a fake clock: expiry at the boundary, renew deadlines, races, fencing."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from scalectl.clocks import FakeClock
from scalectl.controller.ha.elector import LeaderElector, LeadershipChange
from scalectl.controller.ha.lease import Identity, LeadershipLost, Term
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.store.db import make_engine

TTL = 10.0
A = Identity("host-a:1:aaaa", "host-a", 1)
B = Identity("host-b:2:bbbb", "host-b", 2)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def leases(engine: Engine, clock: FakeClock) -> LeaseStore:
    return LeaseStore(engine, TTL, clock.now)


def test_first_daemon_takes_the_lease_in_epoch_one(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    term = store.try_acquire(A, clock.monotonic())
    assert term is not None and term.epoch == 1 and term.holder == A.holder
    lease = store.read()
    assert lease is not None and lease.host == "host-a" and lease.pid == 1
    assert lease.expires_at == pytest.approx(clock.now() + TTL)


def test_a_held_lease_is_not_taken_at_9_9_s_and_is_taken_at_10_1_s(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    assert store.try_acquire(A, clock.monotonic()) is not None
    clock.advance(9.9)
    assert store.try_acquire(B, clock.monotonic()) is None
    clock.advance(0.2)  # 10.1 s after the last renewal
    term = store.try_acquire(B, clock.monotonic())
    assert term is not None and term.epoch == 2 and term.holder == B.holder


def test_renewal_moves_expiry_and_a_deposed_holder_cannot_renew(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    a = store.try_acquire(A, clock.monotonic())
    assert a is not None
    clock.advance(8.0)
    renewed = store.renew(a, clock.monotonic())
    assert renewed is not None and renewed.epoch == 1
    clock.advance(8.0)  # 16 s after acquisition, 8 s after the renewal: still held
    assert store.try_acquire(B, clock.monotonic()) is None
    clock.advance(2.5)
    b = store.try_acquire(B, clock.monotonic())
    assert b is not None and b.epoch == 2
    assert store.renew(renewed, clock.monotonic()) is None  # A woke up: the lease moved on


def test_an_expired_lease_nobody_took_can_still_be_renewed(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    a = store.try_acquire(A, clock.monotonic())
    assert a is not None
    clock.advance(30.0)
    renewed = store.renew(a, clock.monotonic())
    assert renewed is not None and renewed.epoch == 1  # no other daemon acted: same epoch


def test_two_racers_for_one_expired_lease_make_one_winner(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    c = Identity("host-c:3:cccc", "host-c", 3)
    assert store.try_acquire(A, clock.monotonic()) is not None
    clock.advance(TTL + 1)
    # B and C both read the expired lease (epoch 1); only the first conditional update can win.
    first = store.try_acquire(B, clock.monotonic())
    second = store.try_acquire(c, clock.monotonic())
    assert first is not None and first.epoch == 2
    assert second is None


def test_term_validity_ends_at_the_renew_deadline_before_expiry() -> None:
    term = Term("global", A.holder, 3, TTL, renewed_mono=100.0, since=0.0)
    assert term.renew_deadline < TTL
    assert term.valid(100.0 + term.renew_deadline - 0.01)
    assert not term.valid(100.0 + term.renew_deadline)


def test_fence_admits_the_holder_and_refuses_a_deposed_one(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    a = store.try_acquire(A, clock.monotonic())
    assert a is not None
    with Session(engine) as s:
        store.fence(s, a)  # ours: no error
    clock.advance(TTL)
    b = store.try_acquire(B, clock.monotonic())
    assert b is not None
    with Session(engine) as s, pytest.raises(LeadershipLost, match="epoch 2"):
        store.fence(s, a)


def test_release_lets_a_standby_take_over_at_once(engine: Engine, clock: FakeClock) -> None:
    store = leases(engine, clock)
    a = store.try_acquire(A, clock.monotonic())
    assert a is not None
    store.release(a)
    b = store.try_acquire(B, clock.monotonic())
    assert b is not None and b.epoch == 2


class TestElector:
    def electors(self, engine: Engine, clock: FakeClock) -> tuple[LeaderElector, LeaderElector, list[LeadershipChange]]:
        changes: list[LeadershipChange] = []
        a = LeaderElector(leases(engine, clock), A, clock, changes.append)
        b = LeaderElector(leases(engine, clock), B, clock, changes.append)
        return a, b, changes

    def test_one_leader_and_a_standby(self, engine: Engine, clock: FakeClock) -> None:
        a, b, changes = self.electors(engine, clock)
        a.step()
        b.step()
        assert a.is_leader() and not b.is_leader()
        assert [c.kind for c in changes] == ["leader_acquired"]
        with pytest.raises(LeadershipLost, match="standby"):
            b.check()

    def test_a_paused_leader_stops_acting_and_the_standby_takes_over(self, engine: Engine, clock: FakeClock) -> None:
        a, b, changes = self.electors(engine, clock)
        a.step()
        b.step()
        clock.advance(TTL * 2 / 3)  # A is "paused": no renewal for its renew deadline
        assert not a.is_leader()
        with pytest.raises(LeadershipLost):
            a.check()  # no provider call
        with Session(engine) as s, pytest.raises(LeadershipLost):
            a.fence(s)  # no commit
        clock.advance(TTL / 3 + 0.1)
        b.step()
        assert b.is_leader() and b.term is not None and b.term.epoch == 2
        a.step()  # A wakes up, tries to renew as a standby would: the lease is B's
        assert not a.is_leader()
        assert [c.kind for c in changes] == ["leader_acquired", "leader_lost", "leader_acquired"]

    def test_leader_renews_on_schedule_and_keeps_the_lease(self, engine: Engine, clock: FakeClock) -> None:
        a, b, _ = self.electors(engine, clock)
        a.step()
        for _ in range(20):
            clock.advance(2.0)
            a.step()
            b.step()
            assert a.is_leader() and not b.is_leader()

    def test_renewal_errors_keep_leadership_only_until_the_deadline(self, engine: Engine, clock: FakeClock) -> None:
        a, _, changes = self.electors(engine, clock)
        a.step()
        engine.dispose()
        broken = make_engine("sqlite:////nonexistent-dir/x.db")
        a.leases.engine = broken  # the store becomes unreachable
        clock.advance(2.0)
        a.step()
        assert a.is_leader()  # within the deadline: still acting
        clock.advance(5.0)
        a.step()
        assert not a.is_leader()
        assert changes[-1].kind == "leader_lost" and "could not renew" in changes[-1].message
