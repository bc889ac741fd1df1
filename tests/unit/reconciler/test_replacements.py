"""Spot lifecycle through the reconciler on the simulated cloud, with a policy that holds what it sees
(the way a real policy holds inside its scale-out and scale-in windows): replacement on notice and
hand-back to spot."""

from __future__ import annotations

from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.providers.base import Capacity
from tests.builders import tier, tiers_yaml
from tests.unit.reconciler.conftest import World

LIVE = ("pending", "provisioning", "bootstrapping", "ready")


async def _ready_fleet(w: World, tier_name: str, n: int) -> None:
    w.target(tier_name, n)
    await w.run()
    w.clock.advance(61)
    await w.run()
    assert len(w.rows(tier_name, ("ready",))) == n
    w.script.targets.clear()  # from now on the policy holds whatever it is shown


async def _run_tracking_peak(w: World, ticks: int) -> int:
    """Run ``ticks`` ticks 25 s apart; the most instances the cloud had live after any of them."""
    peak = 0
    for _ in range(ticks):
        await w.run()
        peak = max(peak, len(await w.cloud_live()))
        w.clock.advance(25)
    return peak


async def test_a_notice_is_replaced_in_the_same_tick_away_from_the_interrupted_offer(make_world) -> None:
    w: World = make_world()
    await _ready_fleet(w, "batch", 3)
    victim = w.rows("batch", ("ready",))[0]
    w.cloud.interrupt(victim.provider_id or "", notice=120)
    noticed_at = w.clock.now()
    await w.reconciler.tick()
    rows = {r.key: r for r in w.rows("batch")}
    assert rows[victim.key].state in ("draining", "terminated") and rows[victim.key].interrupted
    new = [r for r in rows.values() if r.created_at >= noticed_at]
    assert len(new) == 1 and new[0].state == "provisioning"  # created in the tick that saw the notice
    assert new[0].offer_id != victim.offer_id  # placed away from the offer being taken back
    assert w.script.seen[-1].current == 3  # the policy saw the fleet as it was: holding means replacing
    await w.run(3)
    assert len([r for r in w.rows("batch") if r.state in LIVE]) == 3  # no second replacement


async def test_a_webhook_notice_is_replaced_in_the_same_tick(make_world) -> None:
    w: World = make_world()
    await _ready_fleet(w, "batch", 2)
    victim = w.rows("batch", ("ready",))[0]
    assert w.store.failures.mark_notice("simulated", victim.provider_id, None, w.clock.now()) == victim.key
    noticed_at = w.clock.now()
    await w.reconciler.tick()
    assert [r.state for r in w.rows("batch") if r.created_at >= noticed_at] == ["provisioning"]
    await w.run(40, step=5.0)  # the warned one goes; the policy keeps holding 2
    assert len([r for r in w.rows("batch") if r.state in LIVE]) == 2


async def test_spot_returning_hands_back_without_inflating_the_fleet(make_world) -> None:
    w: World = make_world(tiers_yaml({"batch": tier(capacity="spot", fallback="on-demand", max=12)}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    await _ready_fleet(w, "batch", 3)
    assert {r.capacity for r in w.rows("batch", ("ready",))} == {"on-demand"}
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)  # the offers cache refreshes
    peak = await _run_tracking_peak(w, 40)
    live = [r for r in w.rows("batch") if r.state in LIVE]
    assert len(live) == 3 and {r.capacity for r in live} == {"spot"}
    assert {r.state for r in w.rows("batch") if r.capacity == "on-demand"} == {"terminated"}
    assert peak == 4  # desired 3 + a surge of 1, never more
    assert {s.current for s in w.script.seen[-5:]} == {3}


async def test_max_surge_two_hands_back_two_at_a_time(make_world) -> None:
    w: World = make_world(tiers_yaml({"batch": tier(capacity="spot", fallback="on-demand", max=12, max_surge=2)}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    await _ready_fleet(w, "batch", 4)
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)
    peak = await _run_tracking_peak(w, 40)
    live = [r for r in w.rows("batch") if r.state in LIVE]
    assert len(live) == 4 and {r.capacity for r in live} == {"spot"}
    assert peak == 6  # desired 4 + a surge of 2


async def test_max_surge_zero_hands_back_drain_first(make_world) -> None:
    w: World = make_world(tiers_yaml({"batch": tier(capacity="spot", fallback="on-demand", max=12, max_surge=0)}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    await _ready_fleet(w, "batch", 2)
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)
    w.target("batch", 2)  # drain-first dips below the desired size; the policy asks for it back
    peak = await _run_tracking_peak(w, 30)
    live = [r for r in w.rows("batch") if r.state in LIVE]
    assert len(live) == 2 and {r.capacity for r in live} == {"spot"}
    assert peak == 2


async def test_an_on_demand_base_stays_on_demand_through_scale_out_scale_in_and_hand_back(make_world) -> None:
    spec = tier(capacity="spot", fallback="on-demand", max=8, on_demand_base=1)
    w: World = make_world(tiers_yaml({"batch": spec}))
    w.target("batch", 3)
    await w.run()
    assert sorted(r.capacity for r in w.rows("batch", LIVE)) == ["on-demand", "spot", "spot"]
    w.clock.advance(61)
    await w.run(10, step=25.0)  # spot is there: the base is not handed back
    assert sorted(r.capacity for r in w.rows("batch", LIVE)) == ["on-demand", "spot", "spot"]
    w.target("batch", 1)
    await w.run()
    assert [r.capacity for r in w.rows("batch", LIVE)] == ["on-demand"]  # scale-in keeps the base


async def test_fallback_after_waits_for_spot_before_on_demand(make_world) -> None:
    spec = tier(capacity="spot", fallback="on-demand", max=8, fallback_after="2m")
    w: World = make_world(tiers_yaml({"batch": spec}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    w.target("batch", 2)
    await w.run(20, step=5.0)  # 100 s: still waiting for spot
    assert w.rows("batch", LIVE) == []
    assert any(e.kind == "spot-wait" for e in w.store.records.events(tier="batch"))
    await w.run(5, step=5.0)  # past 2 minutes: on-demand
    assert [r.capacity for r in w.rows("batch", LIVE)] == ["on-demand", "on-demand"]


async def test_fallback_after_survives_a_restart(make_world) -> None:
    """The wait for spot is rebuilt from the stored spot-wait events: a daemon restarted 100 s into a
    2-minute wait falls back 20 s later, not 2 minutes later."""
    spec = tier(capacity="spot", fallback="on-demand", max=8, fallback_after="2m")
    w: World = make_world(tiers_yaml({"batch": spec}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    w.target("batch", 2)
    await w.run(20, step=5.0)  # 100 s of waiting
    assert w.rows("batch", LIVE) == []
    w.reconciler = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    await w.run(5, step=5.0)  # 125 s since the wait began: the restarted reconciler falls back
    assert [r.capacity for r in w.rows("batch", LIVE)] == ["on-demand", "on-demand"]


async def test_a_spot_launch_ends_the_stored_wait(make_world) -> None:
    spec = tier(capacity="spot", fallback="on-demand", max=8, fallback_after="30m")
    w: World = make_world(tiers_yaml({"batch": spec}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    w.target("batch", 1)
    await w.run(10, step=5.0)  # a wait begins
    assert w.store.failures.history(0.0).spot_waits
    w.cloud.set_capacity("H100-SXM5-80GB", 10, capacity=Capacity.SPOT)
    await w.run(60, step=5.0)  # once the offer's no-capacity mark and the offers cache expire: spot placed
    assert [r.capacity for r in w.rows("batch", LIVE)] == ["spot"]
    assert w.store.failures.history(0.0).spot_waits == []


async def test_ten_fallbacks_are_handed_back_in_parallel_within_the_disruption_budget(make_world) -> None:
    # Default budget: a quarter of the tier (10 -> 2) hand-backs at once, each make-before-break; machines
    # take 2 minutes to serve (one at a time took 21 minutes).
    spec = tier(capacity="spot", fallback="on-demand", max=16)
    w: World = make_world(tiers_yaml({"batch": spec}), provision_delay_min=120.0, provision_delay_max=120.0)
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    w.target("batch", 10)
    await w.run(10, step=25.0)
    assert len(w.rows("batch", ("ready",))) == 10
    w.script.targets.clear()
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)  # the offers cache refreshes: spot is back from here
    back_at = w.clock.now()
    peak, done_at = 0, None
    for _ in range(120):  # up to 50 minutes of 25 s ticks
        await w.run()
        live = await w.cloud_live()
        peak = max(peak, len(live))
        ready = w.rows("batch", ("ready",))
        if len(ready) == 10 and {r.capacity for r in ready} == {"spot"} and len(live) == 10:
            done_at = w.clock.now()
            break
        w.clock.advance(25)
    assert done_at is not None, "the fallbacks were never all handed back"
    assert done_at - back_at <= 15 * 60, f"handed back after {(done_at - back_at) / 60:.1f} min"
    assert peak == 12  # desired 10 + 2 hand-backs at once, never more
    ready = [r for r in w.rows("batch") if r.state == "ready"]
    assert len(ready) == 10


async def test_max_disrupted_sets_how_many_fallbacks_are_handed_back_at_once(make_world) -> None:
    spec = tier(capacity="spot", fallback="on-demand", max=16, max_disrupted=4)
    w: World = make_world(tiers_yaml({"batch": spec}))
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    await _ready_fleet(w, "batch", 8)
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)
    peak = await _run_tracking_peak(w, 40)
    live = [r for r in w.rows("batch") if r.state in LIVE]
    assert len(live) == 8 and {r.capacity for r in live} == {"spot"}
    assert peak == 12  # desired 8 + 4 hand-backs at once
