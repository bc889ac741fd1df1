"""Back-offs are one object, rebuilt from the store when the reconciler starts: a restart forgets nothing."""

from __future__ import annotations

from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.domain.failures import FailureHistory
from scalectl.providers.errors import InvalidRequest
from tests.unit.reconciler.conftest import World


def _restarted(w: World) -> Reconciler:
    """A new reconciler on the same store and cloud: what a daemon restart builds."""
    return Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))


def test_create_back_off_doubles_and_a_success_resets_it() -> None:
    b = Backoffs()
    assert b.create_refused("t", 0.0) == (1, 10.0)
    assert b.create_refused("t", 10.0) == (2, 20.0)
    assert b.creates_blocked("t", 29.0) and not b.creates_blocked("t", 30.0)
    b.create_succeeded("t")
    assert b.create_failures("t") == 0 and not b.creates_blocked("t", 11.0)


def test_loading_the_history_replays_it() -> None:
    history = FailureHistory(
        interruptions=[("t", 100.0), ("t", 200.0), ("t", 300.0)],
        no_capacity=[("p", "o1", "spot", 250.0)],
        refused=[("q", 280.0)],
        create_backoffs=[("t", 150.0), ("t", 290.0)],
    )
    b = Backoffs(offer_unavailable_for=180.0)
    b.load(history)
    assert b.spot_backoff("t", 310.0)
    assert b.create_failures("t") == 2 and b.creates_blocked("t", 309.0) and not b.creates_blocked("t", 310.0)
    assert b.offers.until[("p", "o1", "spot")] == 430.0  # type: ignore[index]
    assert b.offers.providers["q"] == 880.0


async def test_a_restart_keeps_the_create_back_off(make_world) -> None:
    w: World = make_world()
    w.target("web", 3)
    w.cloud.fail_next("create", InvalidRequest("bootstrap.user_data: bad key", provider="simulated"), times=50)
    await w.run(1, step=1.0)
    assert w.cloud.calls["create"] == 3  # the planned creates failed for good: a 10 s back-off
    restarted = _restarted(w)
    for _ in range(8):  # inside the back-off: the new reconciler creates nothing either
        await restarted.tick()
        w.clock.advance(1.0)
    assert w.cloud.calls["create"] == 3
    assert restarted.backoffs.create_failures("web") == 1
    for _ in range(3):
        await restarted.tick()
        w.clock.advance(1.0)
    assert w.cloud.calls["create"] == 6  # after it, one more round; then the second, longer wait
    events = [e for e in w.store.records.events("web") if e.kind == "create-backoff"]
    assert "2 failed create(s) in a row; next try in 20s" in events[-1].message


async def test_a_restart_keeps_the_spot_back_off(make_world) -> None:
    w: World = make_world()
    await w.bring_up("batch", 3)
    for row in w.rows("batch", ("ready",)):
        w.cloud.interrupt(row.provider_id or "")
    await w.run()
    assert w.reconciler.backoffs.spot_backoff("batch", w.clock.now())
    restarted = _restarted(w)
    await restarted.tick()
    assert restarted.backoffs.spot_backoff("batch", w.clock.now())
    assert not _restarted(w).backoffs.spot_backoff("batch", w.clock.now())  # it came from the store, not memory
