"""A machine the provider shows stopped, under a live row: kept (garbage collection leaves it to its row),
not serving and not counted toward its tier (the tier launches what it lacks), and booting again, with its
timeouts counted from the start, when it runs again."""

from __future__ import annotations

from scalectl.providers.base import InstanceStatus
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

SERVING = ("ready", "draining")


async def test_a_stopped_instance_is_kept_not_counted_and_replaced(make_world) -> None:
    w: World = make_world()
    await w.bring_up("web", 2)
    victim = w.rows("web", ("ready",))[0]
    await w.cloud.stop(victim.provider_id or "")
    await w.run()
    rows = {r.key: r for r in w.rows("web")}
    assert rows[victim.key].state == "stopped"
    assert len([r for r in rows.values() if r.state in SERVING]) == 1  # the stopped one serves no more
    await w.run(20, step=10.0)  # garbage collection runs every tick, the replacement boots
    rows = {r.key: r for r in w.rows("web")}
    assert rows[victim.key].state == "stopped"
    assert (await w.cloud.get(victim.provider_id or "")).status is InstanceStatus.STOPPED  # not deleted
    # not counted toward the tier's 2: a replacement was launched, and the tier serves with 2 again
    assert len([r for r in rows.values() if r.state == "ready"]) == 2
    assert not [e for e in w.store.records.events(limit=1000) if e.kind == "orphan-deleted"]


async def test_a_stopped_instance_started_again_boots_with_fresh_timeouts(make_world) -> None:
    w: World = make_world(
        tiers_yaml({"web": tier(max=6, launch_timeout=120, policy=min_floor(0))}),
        resume_delay_min=30.0,
        resume_delay_max=30.0,
    )
    await w.bring_up("web", 1)
    victim = w.rows("web", ("ready",))[0]
    await w.cloud.stop(victim.provider_id or "")
    await w.run(50, step=10.0)  # stopped for far longer than the launch timeout
    assert {r.key: r.state for r in w.rows("web")}[victim.key] == "stopped"
    w.target("web", 2)  # keep both: the replacement and the one started again
    await w.cloud.start(victim.provider_id or "")
    await w.run()
    row = {r.key: r for r in w.rows("web")}[victim.key]
    assert row.state == "provisioning" and row.resumed_at is not None  # not timed out on its old launch
    await w.run(5, step=10.0)  # it runs again; scale-in may retire one of the two, but none times out
    row = {r.key: r for r in w.rows("web")}[victim.key]
    assert row.state != "failed"
    events = w.store.records.events(limit=1000)
    assert not [e for e in events if e.instance_key == victim.key and e.kind == "launch-timeout"]
    assert [e.kind for e in events if e.instance_key == victim.key and e.kind in ("stopped", "resumed")] == [
        "stopped",
        "resumed",
    ]


async def test_a_stopped_row_bills_its_disk_and_status_shows_it_stopped(make_world) -> None:
    from scalectl.controller.views.status import fleet_status

    w: World = make_world(storage_per_hour=0.5)
    await w.bring_up("web", 1)
    victim = w.rows("web", ("ready",))[0]
    w.target("web", 0)  # the tier holds nothing else: only the stopped machine bills
    await w.cloud.stop(victim.provider_id or "")
    await w.run()
    row = {r.key: r for r in w.rows("web")}[victim.key]
    assert (row.state, row.storage_per_hour, row.stopped_at) == ("stopped", 0.5, w.clock.now() - 5.0)
    status = {r["tier"]: r for r in fleet_status(w.store.reads)}["web"]
    assert (status["stopped"], status["pending"]) == (1, 0)
    assert status["cost_per_hour"] == 0.5  # its disk, not its GPU


def test_storage_price_is_known_only_where_an_adapter_states_one_figure() -> None:
    from scalectl.providers.stop_start import storage_price

    class Priced:
        storage_per_hour = 0.25

    assert storage_price(Priced()) == 0.25
    assert storage_price(object()) is None
