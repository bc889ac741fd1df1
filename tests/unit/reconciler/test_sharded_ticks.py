"""Two daemons' reconcilers on one store and one cloud, each ticking over its own tiers (a ``TickScope``):
each acts only on its tiers, only the housekeeper deletes orphans, and an instance the other daemon
created after the housekeeper read the fleet is not mistaken for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from scalectl.clocks import FakeClock
from scalectl.controller.ha.shards import TickScope
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store import migrate
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.providers.errors import InvalidRequest
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import BATCH, TIERS, Script, World

WEB_OWNER = TickScope(frozenset({"web"}), housekeeping=True)
BATCH_OWNER = TickScope(frozenset({"batch"}), housekeeping=False)


def two_daemons(tmp_path: Path, tiers: str = TIERS) -> tuple[World, Reconciler]:
    clock = FakeClock()
    options = {"provision_delay_min": 60.0, "provision_delay_max": 60.0}
    cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
    engine = make_engine(f"sqlite:///{tmp_path / 'shared.db'}")
    migrate.upgrade(engine)
    store = Store(engine)
    store.config.apply(parse_config(tiers, "tiers.yaml"), tiers, "tiers.yaml", clock.now())
    script, signals = Script(), StaticSignals(clock)
    first = Reconciler(store, {"simulated": cloud}, signals, clock, policy=PolicyRunner(script))
    second = Reconciler(Store(engine), {"simulated": cloud}, signals, clock, policy=PolicyRunner(script))
    return World(clock, cloud, store, signals, script, first), second


def tiers_of(rows: list[InstanceRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.tier] = counts.get(r.tier, 0) + 1
    return counts


async def test_each_daemon_acts_only_on_its_tiers(tmp_path: Path) -> None:
    w, other = two_daemons(tmp_path)
    w.target("web", 2)
    w.target("batch", 3)
    report = await w.reconciler.tick(WEB_OWNER)
    assert set(report.tiers) == {"web"}
    assert tiers_of(w.rows(states=("provisioning",))) == {"web": 2}
    report = await other.tick(BATCH_OWNER)
    assert set(report.tiers) == {"batch"}
    assert tiers_of(w.rows(states=("provisioning",))) == {"web": 2, "batch": 3}
    w.clock.advance(61)
    await w.reconciler.tick(WEB_OWNER)  # lists the cloud, sees batch's machines: not orphans, not its own
    assert tiers_of(w.rows(states=("ready",))) == {"web": 2}
    assert tiers_of(w.rows(states=("provisioning",))) == {"batch": 3}
    await other.tick(BATCH_OWNER)
    assert tiers_of(w.rows(states=("ready",))) == {"web": 2, "batch": 3}
    assert len(await w.cloud_live()) == 5


async def test_only_the_housekeeper_deletes_orphans(tmp_path: Path) -> None:
    w, other = two_daemons(tmp_path)
    w.target("web", 0)
    w.target("batch", 0)
    await w.cloud.create(_orphan_spec(w))
    assert (await other.tick(BATCH_OWNER)).orphans_deleted == 0
    assert len(await w.cloud_live()) == 1
    assert (await w.reconciler.tick(WEB_OWNER)).orphans_deleted == 1
    assert await w.cloud_live() == []


async def test_an_instance_created_by_another_daemon_mid_tick_is_not_collected(tmp_path: Path) -> None:
    """The housekeeper reads the fleet, then lists the cloud; in between the other daemon stores an intent
    and creates its machine (the crash rule's order). The listing shows a key the fleet read did not have:
    the store, asked again, has it, so nothing is deleted."""
    w, other = two_daemons(tmp_path)
    w.target("web", 0)
    w.target("batch", 2)
    listing = w.cloud.list
    raced: list[str] = []

    async def list_after_the_other_tick(prefix: str) -> Any:
        if not raced:  # the first listing is the housekeeper's (the other tick lists too)
            raced.append("other tick")
            await other.tick(BATCH_OWNER)  # runs between the fleet read and the listing
        return await listing(prefix)

    w.cloud.list = list_after_the_other_tick  # type: ignore[method-assign]
    report = await w.reconciler.tick(WEB_OWNER)
    assert raced and report.orphans_deleted == 0
    assert tiers_of(w.rows(states=("provisioning",))) == {"batch": 2}
    assert len(await w.cloud_live()) == 2
    with w.store.sessions() as s:
        assert not s.scalars(select(EventRecord).where(EventRecord.kind == "orphan-deleted")).all()


@pytest.mark.parametrize(("budget", "batch_instances"), [(5.39, 1), (5.38, 0)])
async def test_the_fleet_budget_counts_the_other_daemons_instances(
    tmp_path: Path, budget: float, batch_instances: int
) -> None:
    text = f"budget_per_hour: {budget}\n" + tiers_yaml({"web": tier(max=6, min=1, policy=min_floor(1)), "batch": BATCH})
    w, other = two_daemons(tmp_path, text)
    w.target("web", 2)  # 2 x $2.40 on-demand H100, stored by the web daemon
    w.target("batch", 3)  # $0.59 each, planned by the other daemon, which never builds web's instances
    await w.reconciler.tick(WEB_OWNER)
    await other.tick(BATCH_OWNER)
    assert tiers_of(w.rows()) == {"web": 2, **({"batch": batch_instances} if batch_instances else {})}
    assert sum(r.price_per_hour for r in w.rows()) <= budget + 1e-9


async def test_a_floor_the_other_daemon_has_not_met_yet_is_held_for_it(tmp_path: Path) -> None:
    text = "budget_per_hour: 3.00\n" + tiers_yaml({"web": tier(max=6, min=1, policy=min_floor(1)), "batch": BATCH})
    w, other = two_daemons(tmp_path, text)
    w.target("batch", 3)
    await other.tick(BATCH_OWNER)  # before web's daemon ticked: $2.40 is set aside for web's floor
    assert tiers_of(w.rows()) == {"batch": 1}  # $0.59 of the $0.60 left


def _orphan_spec(w: World) -> Any:
    from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec

    offer = w.cloud._offers(GpuRequest(gpu="H100-SXM5-80GB"))[0]
    return LaunchSpec(key="sc-web-deadbeef", tier="web", offer=offer, capacity=Capacity.ON_DEMAND)


async def test_a_tier_taken_over_keeps_its_create_back_off(tmp_path: Path) -> None:
    """The other daemon has ticked long before the tier comes to it: what it loaded at its start is old.
    Taking the tier over, it resumes the tier's back-off from the store, as a restart would."""
    w, other = two_daemons(tmp_path)
    w.target("web", 3)
    w.target("batch", 0)
    await other.tick(BATCH_OWNER)  # the other daemon starts (and loads the back-offs of that moment)
    w.cloud.fail_next("create", InvalidRequest("bootstrap.user_data: bad key", provider="simulated"), times=50)
    await w.reconciler.tick(WEB_OWNER)
    assert w.cloud.calls["create"] == 3  # failed for good: web's creates wait 10 s
    w.clock.advance(1.0)
    both = TickScope(frozenset({"web", "batch"}), housekeeping=False)  # web's daemon left; web moved here
    for _ in range(8):
        await other.tick(both)
        w.clock.advance(1.0)
    assert w.cloud.calls["create"] == 3  # inside web's back-off: the new holder creates nothing either
    assert other.backoffs.create_failures("web") == 1
    await other.tick(BATCH_OWNER)  # handed back: what it kept for web is dropped
    assert other.backoffs.create_failures("web") == 0
