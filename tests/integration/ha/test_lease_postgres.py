"""The lease on the real PostgreSQL: its clock, racing acquirers, and the fence that blocks a takeover."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from scalectl.controller.ha.lease import Identity, LeadershipLost
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.store import migrate

pytestmark = pytest.mark.integration


def _no_wall() -> float:
    raise AssertionError("PostgreSQL leases must use the database clock")


def test_many_racers_make_exactly_one_leader(pg_engine: Engine) -> None:
    migrate.upgrade(pg_engine)
    store = LeaseStore(pg_engine, 10.0, _no_wall)
    ids = [Identity(f"h{i}:{i}:x", f"h{i}", i) for i in range(8)]
    start = threading.Barrier(len(ids))

    def race(me: Identity) -> bool:
        start.wait()
        return store.try_acquire(me, 0.0) is not None

    with ThreadPoolExecutor(len(ids)) as pool:
        won = list(pool.map(race, ids))
    assert sum(won) == 1
    lease = store.read()
    assert lease is not None and lease.epoch == 1


def test_expiry_follows_the_database_clock(pg_engine: Engine) -> None:
    migrate.upgrade(pg_engine)
    store = LeaseStore(pg_engine, 0.5, _no_wall)
    a, b = Identity("a:1:x", "a", 1), Identity("b:2:x", "b", 2)
    assert store.try_acquire(a, 0.0) is not None
    assert store.try_acquire(b, 0.0) is None
    with pg_engine.connect() as conn:
        conn.execute(text("SELECT pg_sleep(0.6)"))
    term = store.try_acquire(b, 0.0)
    assert term is not None and term.epoch == 2


def test_a_takeover_waits_for_the_fenced_commit_and_the_old_leader_is_refused_after(pg_engine: Engine) -> None:
    migrate.upgrade(pg_engine)
    store = LeaseStore(pg_engine, 0.2, _no_wall)
    a, b = Identity("a:1:x", "a", 1), Identity("b:2:x", "b", 2)
    term_a = store.try_acquire(a, 0.0)
    assert term_a is not None
    with Session(pg_engine) as s:
        s.execute(text("SELECT pg_sleep(0.3)"))  # the lease expires while A's transaction is open
        store.fence(s, term_a)  # still ours: the row is now share-locked until A commits
        with ThreadPoolExecutor(1) as pool:
            takeover = pool.submit(store.try_acquire, b, 0.0)
            with pytest.raises(TimeoutError):
                takeover.result(timeout=0.5)  # B's UPDATE waits for A's transaction
            s.commit()  # A's commit lands inside its own term
            term_b = takeover.result(timeout=10)
    assert term_b is not None and term_b.epoch == 2
    with Session(pg_engine) as s, pytest.raises(LeadershipLost, match="epoch 2"):
        store.fence(s, term_a)
