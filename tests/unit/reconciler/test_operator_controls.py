"""`scalectl scale` and `scalectl pause` as the reconciler honours them: an override replaces the policy's
count until it expires on the daemon's clock, clamped to max (said in the reason); a pause holds the count
while the policy wants more, and a failed instance is still replaced."""

from __future__ import annotations

from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

LIVE = ("pending", "provisioning", "bootstrapping", "ready", "draining")
COUNTED = ("pending", "provisioning", "bootstrapping", "ready")


def _last_reason(w: World) -> str:
    return w.store.records.decisions("web", limit=1)[-1].reason


async def test_an_override_holds_until_it_expires_on_the_daemons_clock(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": tier(max=6, policy=min_floor(0))}))
    await w.bring_up("web", 2)
    until = w.clock.now() + 3600
    w.store.controls.set_override("web", 5, until, w.clock.now())
    await w.run()
    assert len(w.rows("web", COUNTED)) == 5  # the policy still says 2
    reason = _last_reason(w)
    assert reason.startswith("override 5 until ") and "(scalectl scale)" in reason and "policy: 2" in reason
    w.clock.advance(3500)
    await w.run()
    assert len(w.rows("web", COUNTED)) == 5  # 100 s before the end: still in force
    w.clock.advance(200)  # past the expiry, on the injected clock
    await w.run(3)
    assert len(w.rows("web", COUNTED)) == 2 and "override" not in _last_reason(w)


async def test_an_override_is_clamped_to_max_and_says_so_and_clears(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": tier(min=1, max=3, policy=min_floor(1))}))
    await w.bring_up("web", 1)
    w.store.controls.set_override("web", 9, None, w.clock.now())
    await w.run()
    assert len(w.rows("web", COUNTED)) == 3
    assert "override 9 until cleared" in _last_reason(w) and "capped at tier max 3" in _last_reason(w)
    w.store.controls.set_override("web", 0, None, w.clock.now())  # below min: the operator's wish
    await w.run()
    assert w.store.records.decisions("web", limit=1)[-1].desired == 0
    assert "below tier min 1" in _last_reason(w)
    w.store.controls.set_override("web", None, None, w.clock.now())
    await w.run()
    assert w.store.records.decisions("web", limit=1)[-1].desired == 1
    kinds = [e.message for e in w.store.records.events(tier="web", limit=100) if e.kind == "override"]
    assert kinds[-1] == "override cleared"


async def test_a_paused_tier_under_rising_load_keeps_its_count_and_replaces_a_failed_instance(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": tier(max=6, policy=min_floor(0))}))
    await w.bring_up("web", 3)
    w.store.controls.set_paused("web", True, w.clock.now())
    w.target("web", 6)  # the load rises: the policy asks for twice the fleet
    await w.run(13)  # past a minute: an unchanged count's decision is recorded once a minute
    assert len(w.rows("web", COUNTED)) == 3
    reason = _last_reason(w)
    assert reason.startswith("paused at 3 (scalectl pause)") and "policy: 6" in reason
    failed = w.rows("web", ("ready",))[0]
    w.cloud.set_raw_status(failed.provider_id or "", "failed")
    await w.run(3)  # a crash back-off of 10 s first
    alive = w.rows("web", COUNTED)
    assert len(alive) == 3 and failed.key not in {r.key for r in alive}  # replaced, still 3
    w.store.controls.set_paused("web", False, w.clock.now())
    await w.run()
    assert len(w.rows("web", COUNTED)) == 6
