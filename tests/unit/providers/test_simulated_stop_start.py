"""The simulated cloud's stop and start: the GPU goes back to its pool, the disk bills while stopped, a
start takes the resume delay and fails when the GPU was taken (a full pool, or the configured rate)."""

from __future__ import annotations

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec
from scalectl.providers.errors import InsufficientCapacity, NotSupported
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.providers.simulated import SimulatedCloud
from scalectl.providers.simulated.remote import RemoteSimulatedCloud
from tests.fakes.simulated_cloud_server import start_simulated_cloud

GPU = "H100-SXM5-80GB"


def cloud(clock: FakeClock, **options: float) -> SimulatedCloud:
    base = {"provision_delay_min": 100.0, "provision_delay_max": 100.0, "resume_delay_min": 20.0}
    return SimulatedCloud(
        ProviderConfig("sim", "simulated", options={**base, "resume_delay_max": 20.0, **options}), clock
    )


async def launch(c: SimulatedCloud, key: str, capacity: Capacity = Capacity.ON_DEMAND) -> str:
    offers = await c.offers(GpuRequest(gpu=GPU, capacity=capacity, regions=("sim-east",)))
    made = await c.create(LaunchSpec(key=key, tier="chat", offer=offers[0], capacity=capacity))
    return made.provider_id


async def test_a_stopped_machine_bills_its_disk_only_and_resumes_after_the_resume_delay() -> None:
    clock = FakeClock()
    c = cloud(clock, storage_per_hour=0.36)
    pid = await launch(c, "sct-a")
    price = (await c.get(pid)).price_per_hour
    assert price is not None
    clock.advance(3600)  # an hour running: the GPU price
    await c.stop(pid)
    assert (await c.get(pid)).status is InstanceStatus.STOPPED
    assert c.running_by_tier() == {}
    clock.advance(3600)  # an hour stopped: the disk only
    assert c.billed() == pytest.approx(price + 0.36)
    await c.start(pid)
    assert (await c.get(pid)).status is InstanceStatus.PENDING
    clock.advance(19)
    assert (await c.get(pid)).status is InstanceStatus.PENDING
    clock.advance(2)  # the resume delay (20 s), not the 100 s boot
    assert (await c.get(pid)).status is InstanceStatus.RUNNING
    assert c.billed() == pytest.approx(price + 0.36 + 21 * price / 3600)
    dollars, gpu_seconds = c.billed_by_tier(0, clock.now())["chat"]
    assert gpu_seconds == pytest.approx(3600 + 21) and dollars == pytest.approx(c.billed())


async def test_a_stopped_machine_gives_its_gpu_back_and_cannot_start_while_the_pool_is_full() -> None:
    clock = FakeClock()
    c = cloud(clock)
    c.set_capacity(GPU, 1, capacity=Capacity.ON_DEMAND, region="sim-east")
    first = await launch(c, "sct-a")
    await c.stop(first)
    second = await launch(c, "sct-b")  # the freed GPU goes to another machine
    with pytest.raises(InsufficientCapacity):
        await c.start(first)
    assert (await c.get(first)).status is InstanceStatus.STOPPED
    await c.delete(second)
    await c.start(first)
    assert (await c.get(first)).status is InstanceStatus.PENDING


async def test_resume_failures_come_at_the_configured_rate_and_spot_is_refused() -> None:
    clock = FakeClock()
    c = cloud(clock, resume_failure_rate=0.3)
    failed = 0
    for i in range(200):
        pid = await launch(c, f"sct-r{i}")
        await c.stop(pid)
        try:
            await c.start(pid)
        except InsufficientCapacity:
            failed += 1
    assert 40 <= failed <= 80  # 30% of 200, seeded
    spot = await launch(c, "sct-spot", Capacity.SPOT)
    with pytest.raises(NotSupported):
        await c.stop(spot)


async def test_a_stopped_machine_survives_the_state_file(tmp_path: object) -> None:
    clock = FakeClock()
    path = f"{tmp_path}/sim.json"
    c = cloud(clock, state_path=path)
    c.set_capacity(GPU, 1, capacity=Capacity.ON_DEMAND, region="sim-east")
    pid = await launch(c, "sct-a")
    await c.stop(pid)
    again = cloud(clock, state_path=path)
    assert (await again.get(pid)).status is InstanceStatus.STOPPED
    await launch(again, "sct-b")  # the stopped machine holds no GPU after the reload either
    with pytest.raises(InsufficientCapacity):
        await again.start(pid)


async def test_stop_and_start_over_http() -> None:
    sim, server = start_simulated_cloud(provision_delay_min=0.0, provision_delay_max=0.0, resume_delay_max=0.0,
                                        resume_delay_min=0.0)  # fmt: skip
    remote = build_provider(ProviderConfig(name="shared", type="simulated-remote", base_url=server.url), FakeClock())
    assert isinstance(remote, RemoteSimulatedCloud)
    try:
        offers = await remote.offers(GpuRequest(gpu=GPU, capacity=Capacity.ON_DEMAND, regions=("sim-east",)))
        made = await remote.create(LaunchSpec(key="sct-h", tier="chat", offer=offers[0], capacity=Capacity.ON_DEMAND))
        await remote.stop(made.provider_id)
        await remote.stop(made.provider_id)
        assert (await remote.get(made.provider_id)).status is InstanceStatus.STOPPED
        sim.set_capacity(GPU, 0)
        with pytest.raises(InsufficientCapacity):
            await remote.start(made.provider_id)
        sim.set_capacity(GPU, 5)
        await remote.start(made.provider_id)
        assert (await remote.get(made.provider_id)).status is InstanceStatus.RUNNING
    finally:
        await remote.aclose()
        server.stop()
