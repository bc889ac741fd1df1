"""The seams the simulator drives the cloud and reads the store through."""

from __future__ import annotations

import asyncio

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base, EventRecord
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec, ProviderInstance
from scalectl.providers.simulated import SimulatedCloud
from scalectl.simulator.controller_run import INSTANCES_TABLE, TableWrites
from scalectl.simulator.sim_cloud import address_of, simulation_cloud
from scalectl.simulator.workloads.spec import CloudSpec


async def _launch(cloud: SimulatedCloud, key: str, tier: str = "t") -> ProviderInstance:
    offer = (await cloud.offers(GpuRequest(gpu="H100-SXM5-80GB", capacity=Capacity.ON_DEMAND)))[0]
    return await cloud.create(LaunchSpec(key=key, tier=tier, offer=offer, capacity=Capacity.ON_DEMAND))


def _boot_delays(keys: list[str]) -> list[float]:
    clock = FakeClock(1000.0)
    cloud = simulation_cloud("sim", clock, CloudSpec(provision_delay=(120.0, 300.0)), seed=4)

    async def run() -> list[float]:
        out = []
        for key in keys:
            inst = await _launch(cloud, key)
            assert inst.address == address_of("sim", inst.provider_id)
            out.append(cloud.fleet.live[inst.provider_id].ready_at - clock.now())  # the drawn delay
        return out

    return asyncio.run(run())


def test_provisioning_delays_follow_creation_order_not_the_controllers_random_keys() -> None:
    first = _boot_delays(["sc-a1", "sc-b2", "sc-c3"])
    again = _boot_delays(["sc-x9", "sc-y8", "sc-z7"])
    assert first == again
    assert len(set(first)) == 3  # one draw per instance, not one for all


def test_a_plain_simulated_cloud_keeps_per_key_delays_and_no_address() -> None:
    clock = FakeClock(0.0)
    a, b = SimulatedCloud(clock=clock), SimulatedCloud(clock=clock)
    one = asyncio.run(_launch(a, "sc-same"))
    two = asyncio.run(_launch(b, "sc-same"))
    assert one.address is None
    assert a.fleet.live[one.provider_id].ready_at == b.fleet.live[two.provider_id].ready_at


def test_billing_per_tier_clips_each_instance_to_the_window() -> None:
    clock = FakeClock(0.0)
    cloud = SimulatedCloud(clock=clock)

    async def run() -> None:
        first = await _launch(cloud, "sc-1", tier="a")
        await _launch(cloud, "sc-2", tier="b")
        clock.set(3600.0)
        await cloud.delete(first.provider_id)
        clock.set(7200.0)

    asyncio.run(run())
    billed = cloud.billed_by_tier(1800.0, 7200.0)
    assert billed["a"] == pytest.approx((2.40 * 0.5, 1800.0))
    assert billed["b"] == pytest.approx((2.40 * 1.5, 5400.0))
    assert sum(d for d, _ in cloud.billed_by_tier(0.0, 7200.0).values()) == pytest.approx(cloud.billed())


def test_table_writes_sees_writes_to_its_table_only() -> None:
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    writes = TableWrites(engine, INSTANCES_TABLE)
    assert writes.take() is True  # nothing read yet
    assert writes.take() is False
    with store.sessions() as s:
        s.add(EventRecord(tier="t", t=1.0, kind="note", message="x"))
        s.commit()
    assert writes.take() is False
    assert store.reads.instances() == []  # reads are not writes
    assert writes.take() is False
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {INSTANCES_TABLE} WHERE key = 'none'")
    assert writes.take() is True
