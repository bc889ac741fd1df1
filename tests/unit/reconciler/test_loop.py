"""The reconcile loop on the simulated cloud: lifecycle, scale-in order, crash rule, failover, caps."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.providers.base import Capacity
from scalectl.providers.errors import AuthFailed, Transient
from scalectl.sizing.gpus import GPUS
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World


async def test_scale_out_launches_then_instances_become_ready(make_world) -> None:
    w: World = make_world()
    w.target("web", 3)
    await w.run()
    assert len(w.rows("web", ("provisioning",))) == 3
    assert len(await w.cloud_live()) == 3
    w.clock.advance(61)
    await w.run()
    ready = w.rows("web", ("ready",))
    assert len(ready) == 3
    assert all(r.ready_at is not None and r.provider_id for r in ready)
    await w.run(3)
    assert len(await w.cloud_live()) == 3  # level-triggered: steady state launches nothing more


async def test_intent_row_is_committed_before_the_provider_is_called(make_world) -> None:
    w: World = make_world()
    seen_rows: list[int] = []
    original = w.cloud.create

    async def checking_create(spec):  # type: ignore[no-untyped-def]
        with w.store.sessions() as s:  # a separate session: only committed rows are visible
            row = s.scalars(select(InstanceRecord).where(InstanceRecord.key == spec.key)).first()
            seen_rows.append(0 if row is None else 1)
            assert row is not None and row.state == "pending"
        return await original(spec)

    w.cloud.create = checking_create  # type: ignore[method-assign]
    w.target("web", 2)
    await w.run()
    assert seen_rows == [1, 1]


async def test_scale_in_retires_not_ready_first_then_most_expensive(make_world) -> None:
    w: World = make_world()
    await w.bring_up("web", 2)
    assert len(w.rows("web", ("ready",))) == 2
    with w.store.sessions.begin() as s:  # make one ready instance pricier
        row = s.scalars(select(InstanceRecord).where(InstanceRecord.state == "ready")).first()
        assert row is not None
        row.price_per_hour = 9.0
        pricey = row.key
    w.target("web", 4)
    await w.run()  # two more, still provisioning
    assert len(w.rows("web", ("provisioning",))) == 2
    w.target("web", 1)
    await w.run()
    ended = {r.key for r in w.rows("web", ("terminated",))}
    assert pricey in ended  # then the most expensive ready one
    assert len(w.rows("web", ("ready",))) == 1
    assert len(ended) == 3  # the two not-ready ones went first
    assert len(await w.cloud_live()) == 1


async def test_spot_preemption_is_replaced_in_the_same_tick(make_world) -> None:
    w: World = make_world()
    await w.bring_up("batch", 2)
    victim = w.rows("batch", ("ready",))[0]
    w.cloud.interrupt(victim.provider_id or "")
    await w.run()
    rows = {r.key: r for r in w.rows("batch")}
    assert rows[victim.key].state == "terminated" and rows[victim.key].interrupted
    assert rows[victim.key].cost > 0
    counted = [r for r in rows.values() if r.state in ("pending", "provisioning", "bootstrapping", "ready")]
    assert len(counted) == 2  # replaced, counting toward desired, not on top of it


async def test_interruption_notice_drains_and_replaces(make_world) -> None:
    w: World = make_world()
    await w.bring_up("batch", 1)
    inst = w.rows("batch", ("ready",))[0]
    w.cloud.interrupt(inst.provider_id or "", notice=120)
    await w.run()
    states = sorted(r.state for r in w.rows("batch"))
    assert "provisioning" in states  # replacement launched while the warned one goes
    assert w.rows("batch", ("terminated",))[0].key == inst.key


async def test_webhook_notice_marks_instance_and_reconciler_replaces(make_world) -> None:
    w: World = make_world()
    await w.bring_up("batch", 1)
    inst = w.rows("batch", ("ready",))[0]
    assert w.store.failures.mark_notice("simulated", inst.provider_id, None, w.clock.now()) == inst.key
    await w.run()
    assert {r.key for r in w.rows("batch", ("terminated",))} == {inst.key}
    assert len(w.rows("batch", ("provisioning",))) == 1


async def test_launch_timeout_replaces_a_stuck_instance(make_world) -> None:
    w: World = make_world(provision_delay_min=2000.0, provision_delay_max=2000.0)
    w.target("web", 1)
    await w.run()
    first = w.rows("web")[0]
    w.clock.advance(601)
    await w.run()
    rows = {r.key: r for r in w.rows("web")}
    assert rows[first.key].state == "failed"
    assert "launch timeout" in rows[first.key].reason
    await w.run(ticks=2, step=10.0)  # the replacement waits out the first launch-timeout back-off (10 s)
    rows = {r.key: r for r in w.rows("web")}
    assert sum(1 for r in rows.values() if r.state == "provisioning") == 1
    assert first.provider_id not in {i.provider_id for i in await w.cloud_live()}


async def test_orphans_with_our_prefix_are_deleted_and_others_left_alone(make_world) -> None:
    from scalectl.providers.base import GpuRequest, LaunchSpec

    w: World = make_world()
    offer = (await w.cloud.offers(GpuRequest(gpu="L40S-48GB")))[0]
    orphan = await w.cloud.create(
        LaunchSpec(key="sc-web-deadbeef", tier="web", offer=offer, capacity=Capacity.ON_DEMAND)
    )
    foreign = w.cloud.add_foreign_instance("not-ours")
    other_cluster = await w.cloud.create(
        LaunchSpec(key="zz-web-deadbeef", tier="web", offer=offer, capacity=Capacity.ON_DEMAND)
    )
    report = await w.reconciler.tick()
    assert report.orphans_deleted == 1
    live = {i.provider_id for i in await w.cloud.list("")}
    assert orphan.provider_id not in live
    assert other_cluster.provider_id in live
    assert foreign in w.cloud.fleet.live
    with w.store.sessions() as s:
        kinds = [e.kind for e in s.scalars(select(EventRecord)).all()]
    assert "orphan-deleted" in kinds


async def test_a_failed_instance_still_listed_is_deleted_after_its_row_ends(make_world) -> None:
    """A server that crashed leaves a FAILED machine or deployment record at some providers, which can bill
    until deleted: once its row has ended, the garbage phase deletes it like any unexplained instance."""
    w: World = make_world(tiers_yaml({"web": tier("L40S-48GB", max=2, policy=min_floor(0))}))
    await w.bring_up("web", 1)
    (row,) = w.rows("web", ("ready",))
    w.cloud.fleet.live[row.provider_id].status = "failed"  # crashed; the provider keeps its record
    await w.run(2)
    (ended,) = [r for r in w.rows("web", ("failed", "terminated")) if r.key == row.key]
    assert ended.state == "failed" and "failed at the provider" in ended.reason
    assert row.provider_id not in {i.provider_id for i in await w.cloud.list("")}
    with w.store.sessions() as s:
        deleted = [e.message for e in s.scalars(select(EventRecord)).all() if e.kind == "orphan-deleted"]
    assert any("instance of an ended row" in m for m in deleted), deleted


async def test_crash_between_intent_and_answer_adopts_the_instance(make_world) -> None:
    """The row was committed, the create reached the cloud, the daemon died before recording the id."""
    from scalectl.providers.base import GpuRequest, LaunchSpec

    w: World = make_world()
    w.target("web", 1)
    offer = (await w.cloud.offers(GpuRequest(gpu="H100-SXM5-80GB", capacity=Capacity.ON_DEMAND)))[0]
    now = w.clock.now()
    with w.store.sessions.begin() as s:
        s.add(
            InstanceRecord(
                key="sc-web-cafe0001",
                tier="web",
                state="pending",
                provider="simulated",
                offer_id=offer.offer_id,
                gpu=offer.gpu,
                gpu_count=1,
                region=offer.region,
                capacity="on-demand",
                price_per_hour=2.4,
                created_at=now,
                updated_at=now,
            )
        )
    created = await w.cloud.create(
        LaunchSpec(key="sc-web-cafe0001", tier="web", offer=offer, capacity=Capacity.ON_DEMAND)
    )
    await w.run()
    rows = w.rows("web")
    assert len(rows) == 1 and rows[0].provider_id == created.provider_id and rows[0].state == "provisioning"
    assert len(await w.cloud_live()) == 1  # adopted, no duplicate


async def test_transient_create_error_retries_with_the_same_key(make_world) -> None:
    w: World = make_world()
    w.target("web", 1)
    w.cloud.fail_next("create", Transient("503 upstream", provider="simulated"))
    await w.run()
    (row,) = w.rows("web")
    assert row.state == "pending" and row.provider_id is None
    await w.run(2)
    (row2,) = w.rows("web")
    assert row2.key == row.key and row2.state == "provisioning"
    assert len(await w.cloud_live()) == 1


async def test_permanent_create_error_fails_the_row_with_the_reason(make_world) -> None:
    w: World = make_world()
    w.target("web", 1)
    w.cloud.fail_next("create", AuthFailed("invalid API key (SCALECTL_X_API_KEY)", provider="simulated"))
    await w.run()
    failed = w.rows("web", ("failed",))
    assert len(failed) == 1 and "AuthFailed" in failed[0].reason


async def test_no_capacity_fails_over_to_the_next_offer_in_the_same_tick(make_world) -> None:
    w: World = make_world()
    w.cloud.set_capacity("H100-SXM5-80GB", 0, region="sim-east")
    w.target("web", 2)
    await w.run()
    live = await w.cloud_live()
    assert len(live) == 2 and {i.region for i in live} == {"sim-west"}


SPOT_H100 = tiers_yaml({"batch": tier(capacity="spot", fallback="on-demand", max=8)})


async def test_spot_tier_falls_back_to_on_demand_and_returns_to_spot(make_world) -> None:
    w: World = make_world(SPOT_H100)
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    w.target("batch", 2)
    await w.run()
    assert {r.capacity for r in w.rows("batch", ("provisioning",))} == {"on-demand"}
    w.clock.advance(61)
    await w.run()
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)  # the offers cache refreshes
    peak = 0
    for _ in range(12):
        await w.run()
        peak = max(peak, len(await w.cloud_live()))
        w.clock.advance(30)
    live = [r for r in w.rows("batch") if r.state in ("provisioning", "bootstrapping", "ready")]
    assert len(live) == 2
    assert {r.capacity for r in live} == {"spot"}  # handed back to spot, make-before-break
    assert peak == 3  # one surge at a time


async def test_no_hand_back_when_spot_costs_more(make_world, monkeypatch: pytest.MonkeyPatch) -> None:
    """A100 80G PCIe spot priced at $1.14, above on-demand ($1.04): stay, don't churn."""
    a100 = GPUS["A100-80GB-PCIe"]
    monkeypatch.setitem(GPUS, "A100-80GB-PCIe", dataclasses.replace(a100, on_demand_per_hour=1.04, spot_per_hour=1.14))
    w: World = make_world()
    w.cloud.set_capacity("A100-80GB-PCIe", 0, capacity=Capacity.SPOT)
    w.target("batch", 2)
    await w.run()
    w.clock.advance(61)
    w.cloud.set_capacity("A100-80GB-PCIe", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)
    for _ in range(8):
        await w.run()
        w.clock.advance(30)
    assert len(w.rows("batch")) == 2  # no surge was ever launched
    assert {r.capacity for r in w.rows("batch")} == {"on-demand"}


async def test_budget_is_never_exceeded(make_world) -> None:
    tiers = tiers_yaml({"web": tier(max=10, budget_per_hour=6.0, policy=min_floor(0))})
    w: World = make_world(tiers)
    w.target("web", 10)
    await w.run(3)
    live = await w.cloud_live()
    assert len(live) == 2  # 2 × $2.40 fits under $6/h; a third would not
    assert sum(i.price_per_hour or 0 for i in live) <= 6.0


async def test_max_is_never_exceeded_even_when_policy_asks_more(make_world) -> None:
    w: World = make_world()
    w.target("web", 50)
    await w.run(3)
    assert len(await w.cloud_live()) == 6


async def test_policy_error_holds_the_current_count(make_world) -> None:
    w: World = make_world()
    w.target("web", 2)
    await w.run()
    w.script.error = ZeroDivisionError("boom")
    report = await w.reconciler.tick()
    assert report.tiers["web"].desired == 2
    assert "policy error" in report.tiers["web"].reason
    assert len(await w.cloud_live()) == 2


async def test_provider_outage_holds_instances(make_world) -> None:
    w: World = make_world()
    w.target("web", 2)
    await w.run()
    w.clock.advance(61)
    w.cloud.fail_next("list", Transient("timeout", provider="simulated"))
    report = await w.reconciler.tick()
    assert "simulated" in report.provider_errors
    assert len(w.rows("web", ("failed", "terminated"))) == 0


async def test_removed_tier_is_drained(make_world) -> None:
    from scalectl.tiers.config import parse_config
    from tests.unit.reconciler.conftest import WEB

    w: World = make_world()
    w.target("batch", 2)
    await w.run()
    only_web = tiers_yaml({"web": WEB})
    w.store.config.apply(parse_config(only_web, "t.yaml"), only_web, "t.yaml", w.clock.now())
    await w.run(2)
    assert len(w.rows("batch", ("terminated",))) == 2
    assert await w.cloud_live() == []


@pytest.mark.parametrize("ticks", [1, 3])
async def test_decisions_are_recorded_with_reason_and_signals(make_world, ticks: int) -> None:
    w: World = make_world()
    w.signals.set("web", queue_depth=7.0)
    w.target("web", 1)
    await w.run(ticks)
    decisions = w.store.records.decisions("web")
    assert decisions and decisions[-1].reason == "scripted 1"
    assert decisions[-1].signals["queue_depth"] == 7.0
    assert len(decisions) == 1  # unchanged decisions are not re-recorded within a minute


async def test_a_retried_create_carries_the_same_server(make_world) -> None:
    from scalectl.sizing.server import ServerDescription

    w: World = make_world()
    w.reconciler.server_for = lambda name, tier: ServerDescription(model=f"org/{name}", args=())
    seen = []
    original = w.cloud.create

    async def recording_create(spec):  # type: ignore[no-untyped-def]
        seen.append((spec.key, spec.server.model))
        return await original(spec)

    w.cloud.create = recording_create  # type: ignore[method-assign]
    w.target("web", 1)
    w.cloud.fail_next("create", Transient("503", provider="simulated"))
    await w.run(2)
    assert len(seen) == 2 and seen[0] == seen[1] == (seen[0][0], "org/web")


async def test_a_create_refused_for_good_backs_the_tier_off_instead_of_storming(make_world) -> None:
    from scalectl.providers.errors import InvalidRequest

    w: World = make_world()
    w.target("web", 3)
    w.cloud.fail_next("create", InvalidRequest("bootstrap.user_data: bad key", provider="simulated"), times=50)
    await w.run(1, step=1.0)
    assert w.cloud.calls["create"] == 3  # the first tick tries what it planned
    await w.run(8, step=1.0)  # 8 more ticks inside the 10 s back-off: no create at all
    assert w.cloud.calls["create"] == 3
    await w.run(3, step=1.0)  # after it: one more round, then a longer wait
    assert w.cloud.calls["create"] == 6
    events = [e for e in w.store.records.events("web") if e.kind == "create-backoff"]
    assert events and "next try in 20s" in events[-1].message and "bad key" in events[-1].message


async def test_success_resets_the_back_off(make_world) -> None:
    from scalectl.providers.errors import InvalidRequest

    w: World = make_world()
    w.target("web", 1)
    w.cloud.fail_next("create", InvalidRequest("transiently wrong", provider="simulated"))
    await w.run(1, step=11.0)
    await w.run(1)
    assert len(w.rows("web", ("provisioning",))) == 1
    assert w.reconciler.backoffs.create_failures("web") == 0


async def test_a_provider_that_refuses_the_account_is_skipped_for_others(make_world) -> None:
    from scalectl.clocks import FakeClock
    from scalectl.controller.reconciler.decide import PolicyRunner
    from scalectl.controller.reconciler.loop import Reconciler
    from scalectl.providers.errors import QuotaExceeded
    from scalectl.providers.registry import ProviderConfig
    from scalectl.providers.simulated import SimulatedCloud
    from scalectl.tiers.config import parse_config
    from tests.unit.reconciler.conftest import Script

    tiers = tiers_yaml(
        {"web": tier(providers=["cheap", "dear"], min=2, max=2, policy=min_floor(2))},
        {"cheap": {"type": "simulated"}, "dear": {"type": "simulated"}},
    )
    w: World = make_world(tiers)
    clock: FakeClock = w.clock
    cheap = SimulatedCloud(ProviderConfig("cheap", "simulated"), clock)
    dear = SimulatedCloud(ProviderConfig("dear", "simulated"), clock)
    script = Script()
    script.targets["min-floor"] = 2
    reconciler = Reconciler(w.store, {"cheap": cheap, "dear": dear}, w.signals, clock, policy=PolicyRunner(script))
    w.store.config.apply(parse_config(tiers, "t.yaml"), tiers, "t.yaml", clock.now())
    cheap.fail_next("create", QuotaExceeded("GPU quota reached", provider="cheap"), times=10)
    await reconciler.tick()
    assert len([i for i in await dear.list("sc-") if not i.status.is_gone]) == 2  # failed over in the same tick
    assert cheap.calls["create"] == 2  # the two planned at once; then the whole account is skipped
    clock.advance(30)
    await reconciler.tick()
    assert cheap.calls["create"] == 2


async def test_at_max_the_hand_back_to_spot_drains_first_and_never_exceeds_max(make_world) -> None:
    tiers = tiers_yaml({"batch": tier(capacity="spot", fallback="on-demand", min=2, max=2)})
    w: World = make_world(tiers)
    w.cloud.set_capacity("H100-SXM5-80GB", 0, capacity=Capacity.SPOT)
    await w.bring_up("batch", 2)
    assert {r.capacity for r in w.rows("batch", ("ready",))} == {"on-demand"}
    w.cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.SPOT)
    w.clock.advance(200)
    peak = 0
    for _ in range(30):
        await w.run()
        peak = max(peak, len(await w.cloud_live()))
        w.clock.advance(30)
    live = [r for r in w.rows("batch") if r.state in ("provisioning", "bootstrapping", "ready")]
    assert {r.capacity for r in live} == {"spot"} and len(live) == 2
    assert peak <= 2  # max held throughout


async def test_signal_errors_and_their_counts_are_recorded_for_describe(make_world) -> None:
    w: World = make_world()
    w.signals.errors["web"] = {"queue": "ConnectionError: redis://:***@127.0.0.1:1/0 refused"}
    w.signals.error_counts = lambda tier: {"queue": 7} if tier == "web" else {}  # type: ignore[attr-defined]
    w.target("web", 1)
    await w.run()
    last = w.store.records.decisions("web")[-1]
    assert last.signals["errors"] == {"queue": "ConnectionError: redis://:***@127.0.0.1:1/0 refused"}
    assert last.signals["error_counts"] == {"queue": 7}


async def test_a_warned_instance_drains_its_work_within_the_notice_window(make_world) -> None:
    from scalectl.controller.reconciler.loop import NOTICE_DRAIN_MAX

    w: World = make_world()
    running = {"n": 3.0}

    async def drain_check(row):  # type: ignore[no-untyped-def]
        return running["n"]

    w.reconciler.drain_check = drain_check
    await w.bring_up("batch", 1)
    inst = w.rows("batch", ("ready",))[0]
    with w.store.sessions.begin() as s:  # give it an address so the drain check applies
        s.get(InstanceRecord, inst.key).address = "127.0.0.1:9"  # type: ignore[union-attr]
    w.cloud.interrupt(inst.provider_id or "", notice=600)  # a long notice: our window is the cap
    await w.run()
    assert w.rows("batch", ("draining",))[0].key == inst.key  # still finishing its work
    assert len(w.rows("batch", ("provisioning",))) == 1  # while its replacement boots
    running["n"] = 0.0
    await w.run()
    assert w.rows("batch", ("terminated",))[0].key == inst.key  # drained: deleted

    # and a warned instance that never drains goes when the notice window is over
    w.target("batch", 2)
    running["n"] = 5.0
    await w.run(15, step=10.0)
    busy = next(r for r in w.rows("batch", ("ready",)))
    with w.store.sessions.begin() as s:
        s.get(InstanceRecord, busy.key).address = "127.0.0.1:9"  # type: ignore[union-attr]
    w.cloud.interrupt(busy.provider_id or "", notice=600)
    await w.run(int(NOTICE_DRAIN_MAX // 10), step=10.0)
    assert any(r.key == busy.key for r in w.rows("batch", ("draining",)))
    await w.run(2, step=10.0)
    ended = next(r for r in w.rows("batch") if r.key == busy.key)
    assert ended.state == "terminated" and "drain timeout 90s passed" in ended.reason
