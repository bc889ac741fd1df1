"""A tier's warm pool: scale-in stops a served instance instead of deleting it while the pool is short,
scale-out starts pool members before it creates, a refused or slow start falls back to a create at once,
and no member outlives the pool that wanted it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.models import InstanceRecord
from scalectl.providers.base import InstanceStatus
from scalectl.providers.errors import Transient
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World
from tests.unit.reconciler.test_pool_size import _state


def _tiers(**pool: Any) -> str:
    """The tier with a pool; filled only from scale-in unless ``fill`` is given (the tests of filling)."""
    pool = {"fill": False, **pool}
    return tiers_yaml({"web": tier(max=6, launch_timeout="10m", policy=min_floor(0), warm_pool=pool)})


def _events(w: World, kind: str) -> list[Any]:
    return [e for e in w.store.records.events(limit=10_000) if e.kind == kind]


async def _leaks(w: World) -> set[str]:
    """Machines at the cloud that no live row follows, and live rows whose machine is gone."""
    machines = {i.provider_id for i in await w.cloud.list("sc-")}
    rows = {r.provider_id for r in w.rows("web") if r.state not in ("terminated", "failed") and r.provider_id}
    return machines ^ rows


async def _pool_of(w: World, n: int, *, size: int, **options: Any) -> list[str]:
    """A tier of ``n`` ready instances scaled to 0: ``size`` of them stop into the pool. Their keys."""
    await w.bring_up("web", n)
    w.target("web", 0)
    await w.run(3)
    stopped = w.rows("web", ("stopped",))
    assert len(stopped) == min(n, size)
    return [r.key for r in stopped]


async def test_scale_in_stops_served_instances_while_the_pool_is_short_and_deletes_the_rest(make_world) -> None:
    w: World = make_world(_tiers(size=2), storage_per_hour=0.05)
    keys = await _pool_of(w, 3, size=2)
    for key in keys:
        row = {r.key: r for r in w.rows("web")}[key]
        assert (row.end_state, row.storage_per_hour) == ("stopped", 0.05)
        assert (await w.cloud.get(row.provider_id or "")).status is InstanceStatus.STOPPED
    assert len(w.rows("web", ("terminated",))) == 1  # the third: the pool was full
    assert len(_events(w, "pooled")) == 2
    await w.run(20, step=10.0)  # kept: not collected, not counted (nothing is launched beside them)
    assert len(w.rows("web", ("stopped",))) == 2 and w.cloud.calls["create"] == 3
    assert await _leaks(w) == set()


async def test_scale_out_starts_pool_members_before_it_creates(make_world) -> None:
    w: World = make_world(_tiers(size=2), resume_delay_min=20.0, resume_delay_max=20.0)
    keys = await _pool_of(w, 2, size=2)
    w.target("web", 3)
    await w.run()
    assert (w.cloud.calls["start"], w.cloud.calls["create"]) == (2, 3)  # two started, one created
    rows = {r.key: r for r in w.rows("web")}
    assert {rows[k].state for k in keys} == {"provisioning"}  # counted as booting, not serving
    assert len(_events(w, "resuming")) == 2
    await w.run(5, step=5.0)  # the 20 s resume, not the 60 s boot
    rows = {r.key: r for r in w.rows("web")}
    assert {rows[k].state for k in keys} == {"ready"}
    assert len(w.rows("web", ("ready",))) == 2  # the created one still boots
    assert await _leaks(w) == set()


async def test_a_refused_start_deletes_the_member_and_creates_in_the_same_tick(make_world) -> None:
    w: World = make_world(_tiers(size=1), resume_failure_rate=1.0)
    (key,) = await _pool_of(w, 1, size=1)
    created = w.cloud.calls["create"]
    w.target("web", 1)
    await w.run()
    assert w.cloud.calls["create"] == created + 1  # at once, not a tick later
    rows = {r.key: r for r in w.rows("web")}
    assert rows[key].state == "failed"  # deleted this tick, after its refusal
    assert [e.instance_key for e in _events(w, "resume-failed")] == [key]
    assert await _leaks(w) == set()


async def test_a_start_not_serving_within_resume_timeout_is_deleted_and_replaced(make_world) -> None:
    w: World = make_world(_tiers(size=1, resume_timeout="30s"), resume_delay_min=600.0, resume_delay_max=600.0)
    (key,) = await _pool_of(w, 1, size=1)
    w.target("web", 1)
    await w.run()
    created = w.cloud.calls["create"]
    await w.run(7, step=5.0)  # past the 30 s bound, far short of the 600 s resume
    rows = {r.key: r for r in w.rows("web")}
    assert rows[key].state == "failed"
    assert [e.instance_key for e in _events(w, "resume-timeout")] == [key]
    assert w.cloud.calls["create"] == created + 1
    assert await _leaks(w) == set()


async def test_members_of_an_older_server_or_beyond_max_or_without_a_pool_are_deleted(make_world) -> None:
    w: World = make_world(_tiers(size=3))
    keys = await _pool_of(w, 3, size=3)
    with w.store.sessions() as s:  # one member was launched with another server description
        s.execute(update(InstanceRecord).where(InstanceRecord.key == keys[0]).values(server_hash="0123456789abcdef"))
        s.commit()
    await w.run()
    assert {r.key: r.state for r in w.rows("web")}[keys[0]] == "terminated"
    text = _tiers(size=1)  # the pool shrinks: one of the two left goes
    w.store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", w.clock.now())
    await w.run()
    assert len(w.rows("web", ("stopped",))) == 1
    text = tiers_yaml({"web": tier(max=6, policy=min_floor(0))})  # no pool any more: none is kept
    w.store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", w.clock.now())
    await w.run()
    assert w.rows("web", ("stopped", "draining")) == []
    assert await w.cloud.list("sc-") == []


async def test_a_stop_intent_outlives_a_failed_stop_and_a_restart(make_world) -> None:
    w: World = make_world(_tiers(size=1))
    await w.bring_up("web", 1)
    w.cloud.fail_next("stop", Transient("down", provider="simulated"))
    w.target("web", 0)
    await w.run()  # drained and asked to stop: the stop failed
    (row,) = w.rows("web")
    assert (row.state, row.end_state) == ("draining", "stopped")  # the intent is stored
    # a new daemon on the same store (the old one crashed): it stops the machine, it does not delete it
    w.reconciler = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    await w.run(3, step=10.0)
    (row,) = w.rows("web")
    assert row.state == "stopped" and w.cloud.calls["delete"] == 0
    assert await _leaks(w) == set()


def _filling(floor: int = 1, **pool: Any) -> str:
    return tiers_yaml({"web": tier(max=6, launch_timeout="10m", policy=min_floor(floor), warm_pool=pool)})


async def test_the_pool_fills_by_creating_members_that_boot_once_stop_and_never_count(make_world) -> None:
    w: World = make_world(_filling(size=2))
    w.target("web", 1)
    report = await w.reconciler.tick()  # the tier's own create first: no fill while it plans one
    assert w.cloud.calls["create"] == 1 and report.tiers["web"].launched == 1
    w.clock.advance(5)
    await w.run()  # now the pool fills: two creates, stored as intents bound for a stop
    assert w.cloud.calls["create"] == 3
    filling = [r for r in w.rows("web") if r.end_state == "stopped"]
    assert len(filling) == 2 and {r.state for r in filling} == {"provisioning"}
    w.clock.advance(61)
    for _ in range(4):  # booted: ready once, drained at once (nothing to finish), stopped
        report = await w.reconciler.tick()
        assert report.tiers["web"].current == 1  # never counted toward the tier
        w.clock.advance(5)
    rows = {r.key: r for r in w.rows("web")}
    assert {rows[r.key].state for r in filling} == {"stopped"}
    assert all(rows[r.key].ready_at is not None for r in filling)  # served readiness once: its disk is warm
    assert len(_events(w, "pooled")) == 2 and w.cloud.calls["delete"] == 0
    await w.run(10, step=10.0)  # full: nothing more is created
    assert w.cloud.calls["create"] == 3
    assert await _leaks(w) == set()


async def test_a_scale_out_takes_members_filling_the_pool_before_it_creates(make_world) -> None:
    w: World = make_world(_filling(size=2))
    w.target("web", 1)
    await w.run(2)  # the tier's instance, then two members on their way to fill the pool
    assert w.cloud.calls["create"] == 3
    w.target("web", 3)
    await w.run()
    assert w.cloud.calls["create"] == 3  # the two booting members became the tier's: nothing created
    assert len(_events(w, "pool-taken")) == 2
    assert all(r.end_state == "terminated" for r in w.rows("web"))
    w.clock.advance(61)
    report = await w.reconciler.tick()
    assert report.tiers["web"].current == 3 and report.tiers["web"].ready == 3
    await w.run(3)  # two above the floor (1): scale-in will bring them back, so nothing is created for the pool
    assert w.cloud.calls["create"] == 3
    w.target("web", 1)
    await w.run(3)
    assert len(w.rows("web", ("stopped",))) == 2 and w.cloud.calls["create"] == 3  # refilled for nothing
    assert await _leaks(w) == set()


async def test_a_fill_survives_a_crash_between_intent_and_answer_and_leaves_with_its_pool(make_world) -> None:
    w: World = make_world(_filling(floor=0, size=1))
    w.target("web", 0)
    w.cloud.fail_next("create", Transient("down", provider="simulated"))
    await w.run()  # the intent is stored, the create failed
    (row,) = w.rows("web")
    assert (row.state, row.end_state, row.provider_id) == ("pending", "stopped", None)
    # a new daemon on the same store: it asks again under the same key, and the member still fills the pool
    w.reconciler = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    await w.run(3, step=10.0)
    (row,) = w.rows("web")
    assert row.provider_id and row.end_state == "stopped" and w.cloud.calls["create"] == 2
    w.clock.advance(61)
    await w.run(3)
    assert w.rows("web", ("stopped",))
    text = tiers_yaml({"web": tier(max=6, policy=min_floor(0))})  # the pool removed: its member is deleted
    w.store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", w.clock.now())
    await w.run(2)
    assert await w.cloud_live() == [] and await _leaks(w) == set()


async def test_members_still_booting_to_fill_a_removed_pool_are_deleted(make_world) -> None:
    w: World = make_world(_filling(floor=0, size=2))
    w.target("web", 0)
    await w.run()
    assert len([r for r in w.rows("web") if r.end_state == "stopped"]) == 2
    text = tiers_yaml({"web": tier(max=6, policy=min_floor(0))})
    w.store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", w.clock.now())
    await w.run(2)
    assert w.rows("web", ("pending", "provisioning", "bootstrapping", "ready", "draining", "stopped")) == []
    assert await w.cloud_live() == [] and await _leaks(w) == set()


async def test_an_auto_pool_grows_by_nothing_until_the_core_has_measured_its_error_then_fills(make_world) -> None:
    w: World = make_world(_filling(floor=1, size="auto", max=3))
    w.target("web", 1)
    await w.run(3)
    assert w.cloud.calls["create"] == 1  # the tier's own; the pool's size is unknown: nothing created for it
    (sized,) = _events(w, "warm-pool-size")
    assert "warm pool size 0: auto: the core's forecast error is not measured yet" in sized.message
    # the core measured a p90 shortfall of 20 req/s at 8 req/s an instance: 2.5 → 3 members (its max)
    w.reconciler.decide._states["web"] = (_state([0.0] * 30 + [20.0] * 10), 1)
    await w.run()
    assert w.cloud.calls["create"] == 4
    latest = _events(w, "warm-pool-size")[-1].message
    assert "warm pool size 3: auto: the p90 forecast shortfall is 2.50 instances" in latest
    assert await _leaks(w) == set()
