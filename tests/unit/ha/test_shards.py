"""Sharded leadership on a fake clock: who should hold which tier, hand-over when a daemon joins, take-over
when one stops renewing (at 9.9 s vs 10.1 s), and the fence of a tick whose tier moved."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from scalectl.clocks import FakeClock
from scalectl.controller.ha.lease import Identity, LeadershipLost
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.ha.shard_elector import ShardElector
from scalectl.controller.ha.shards import HOUSEKEEPING, assignment, owner_of, tier_lease

TTL = 10.0
A = Identity("host-a:1:aaaa", "host-a", 1)
B = Identity("host-b:2:bbbb", "host-b", 2)
C = Identity("host-c:3:cccc", "host-c", 3)
TIERS = [f"tier-{i:03d}" for i in range(200)]


# ---- the assignment (pure) --------------------------------------------------------------------------
def test_every_lease_has_one_owner_and_the_split_is_even() -> None:
    holders = ["a", "b", "c", "d"]
    owners = assignment(TIERS, holders)
    counts = {h: sum(1 for o in owners.values() if o == h) for h in holders}
    assert sum(counts.values()) == 200
    assert all(30 <= n <= 70 for n in counts.values()), counts  # 50 each on average
    assert owners == assignment(TIERS, list(reversed(holders)))  # the order of the replicas does not matter


def test_a_joining_daemon_takes_only_from_others_and_a_leaving_one_gives_only_its_own() -> None:
    before = assignment(TIERS, ["a", "b", "c"])
    joined = assignment(TIERS, ["a", "b", "c", "d"])
    moved = {t for t in TIERS if before[t] != joined[t]}
    assert moved and all(joined[t] == "d" for t in moved)
    left = assignment(TIERS, ["a", "c"])
    moved = {t for t in TIERS if before[t] != left[t]}
    assert moved == {t for t in TIERS if before[t] == "b"}


def test_no_replicas_no_owner() -> None:
    assert owner_of("tier:x", []) is None and assignment(TIERS, []) == {}


# ---- the elector on a fake clock --------------------------------------------------------------------
def electors(engine: Engine, clock: FakeClock, *who: Identity) -> list[ShardElector]:
    return [ShardElector(LeaseStore(engine, TTL, clock.now), me, clock) for me in who]


def held(engine: Engine, now: float) -> dict[str, str]:
    with Session(engine) as s:
        rows = s.execute(text("SELECT name, holder FROM leader_leases WHERE expires_at > :now"), {"now": now})
        return {r.name: r.holder for r in rows}


def test_one_daemon_holds_every_tier_and_the_housekeeping(engine: Engine) -> None:
    clock = FakeClock()
    (a,) = electors(engine, clock, A)
    a.step(TIERS[:10], [A.holder])
    assert a.owned_tiers() == TIERS[:10] and a.housekeeper() and a.is_leader()
    scope = a.begin_tick()
    assert scope.tiers == frozenset(TIERS[:10]) and scope.housekeeping


def test_a_joining_daemon_gets_its_share_and_no_tier_has_two_holders(engine: Engine) -> None:
    clock = FakeClock()
    a, b = electors(engine, clock, A, B)
    tiers = TIERS[:40]
    a.step(tiers, [A.holder])
    assert len(a.owned_tiers()) == 40
    members = [A.holder, B.holder]
    b.step(tiers, members)  # B's share is still held by A: B takes nothing yet
    assert b.owned_tiers() == []
    a.step(tiers, members)  # A hands B's share back ...
    b.step(tiers, members)  # ... and B takes it
    want = assignment([tier_lease(t) for t in tiers] + [HOUSEKEEPING], members)
    assert held(engine, clock.now()) == want
    assert set(a.owned_tiers()).isdisjoint(b.owned_tiers())
    assert len(a.owned_tiers()) + len(b.owned_tiers()) == 40 and a.owned_tiers() and b.owned_tiers()


def test_a_daemon_that_stops_renewing_loses_its_tiers_after_the_ttl_not_before(engine: Engine) -> None:
    clock = FakeClock()
    a, b = electors(engine, clock, A, B)
    tiers = TIERS[:20]
    members = [A.holder, B.holder]
    for _ in range(2):
        a.step(tiers, members)
        b.step(tiers, members)
    a_tiers = a.owned_tiers()
    assert a_tiers
    clock.advance(9.9)  # A is paused; B renews and, seeing only itself alive, wants A's tiers too
    b.step(tiers, [B.holder])
    assert set(b.owned_tiers()).isdisjoint(a_tiers)
    clock.advance(0.2)  # 10.1 s after A's last renewal
    b.step(tiers, [B.holder])
    assert b.owned_tiers() == sorted(tiers)


def test_a_tick_cannot_commit_or_call_once_a_tier_of_its_scope_moved(engine: Engine) -> None:
    clock = FakeClock()
    a, b = electors(engine, clock, A, B)
    tiers = TIERS[:20]
    a.step(tiers, [A.holder])
    a.begin_tick()  # the tick runs on all 20 tiers
    members = [A.holder, B.holder]
    a.step(tiers, members)  # a tick is running on them: A keeps what it should hand over
    assert len(a.owned_tiers()) == 20
    a.check()  # so the tick may go on
    a.end_tick()
    a.step(tiers, members)  # between ticks A hands B's share over
    b.step(tiers, members)
    assert b.owned_tiers()
    a.begin_tick()
    a.check()
    with Session(engine) as s:
        a.fence(s)  # A's own scope is still A's


def test_the_fence_refuses_a_scope_whose_lease_was_taken_over(engine: Engine) -> None:
    clock = FakeClock()
    a, b = electors(engine, clock, A, B)
    tiers = TIERS[:20]
    a.step(tiers, [A.holder])
    a.begin_tick()
    clock.advance(TTL + 0.1)  # A is paused past its lease mid-tick; B takes everything
    b.step(tiers, [B.holder])
    assert b.owned_tiers() == sorted(tiers)
    with pytest.raises(LeadershipLost):
        a.check()  # past its renew deadline: no provider call
    with Session(engine) as s, pytest.raises(LeadershipLost):
        a.leases.fence_all(s, a.terms)  # and the store agrees: no commit


def test_renewal_drops_a_lease_taken_over_and_keeps_the_rest(engine: Engine) -> None:
    clock = FakeClock()
    a, c = electors(engine, clock, A, C)
    tiers = TIERS[:6]
    a.step(tiers, [A.holder])
    clock.advance(TTL + 0.1)
    victim = tier_lease(tiers[0])
    assert c.leases.try_acquire(C, clock.monotonic(), name=victim) is not None
    a.step(tiers, [A.holder])  # renews the five it still holds, learns it lost the sixth, and cannot retake it
    assert tiers[0] not in a.owned_tiers() and len(a.owned_tiers()) == 5
