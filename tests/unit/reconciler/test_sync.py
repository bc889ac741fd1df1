"""The sync phase on the simulated cloud, without a database: a stub unit of work collects the events."""

from __future__ import annotations

from typing import Any

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.calls import Calls
from scalectl.controller.reconciler.report import TickReport
from scalectl.controller.reconciler.sync import SyncPhase
from scalectl.controller.reconciler.tick import Tick
from scalectl.domain.instance import Instance, InstanceEvent, InstanceState
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec
from scalectl.providers.errors import Transient
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud

S = InstanceState


class Events:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def record(self, event: InstanceEvent | None) -> None:
        if event is not None:
            self.kinds.append(event.kind)


def _tick(clock: FakeClock) -> tuple[Tick, Events]:
    events = Events()
    return Tick(clock.now(), {}, events, TickReport(clock.now())), events  # type: ignore[arg-type]


async def _world(**options: Any) -> tuple[FakeClock, SimulatedCloud, Instance]:
    clock = FakeClock()
    opts = {"provision_delay_min": 60.0, "provision_delay_max": 60.0, **options}
    cloud = SimulatedCloud(ProviderConfig(name="sim", type="simulated", options=opts), clock)
    (offer, *_) = await cloud.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1))
    inst = Instance(
        key="sc-web-1", tier="web", state=S.PENDING, provider="sim", offer_id=offer.offer_id, gpu=offer.gpu,
        region=offer.region, capacity="on-demand", price_per_hour=2.0, created_at=0.0, updated_at=0.0,
    )  # fmt: skip
    await cloud.create(LaunchSpec(key=inst.key, tier="web", offer=offer, capacity=Capacity.ON_DEMAND))
    return clock, cloud, inst


def _phase(cloud: SimulatedCloud, backoffs: Backoffs | None = None) -> SyncPhase:
    return SyncPhase({"sim": cloud}, Calls(), backoffs or Backoffs(), "sc-", None)


async def test_an_intent_whose_instance_exists_is_adopted_then_follows_it_to_ready() -> None:
    clock, cloud, inst = await _world()
    phase = _phase(cloud)
    tick, events = _tick(clock)
    seen = await phase.run(tick, [inst])
    assert inst.state is S.PROVISIONING and inst.provider_id in seen["sim"]
    clock.advance(61)
    tick, events = _tick(clock)
    await phase.run(tick, [inst])
    assert inst.state is S.READY and events.kinds == ["ready"]


async def test_an_unreachable_provider_changes_nothing_and_is_reported() -> None:
    clock, cloud, inst = await _world()
    cloud.fail_next("list", Transient("timeout", provider="sim"))
    tick, events = _tick(clock)
    assert await _phase(cloud).run(tick, [inst]) == {}
    assert inst.state is S.PENDING and events.kinds == [] and "sim" in tick.report.provider_errors


async def test_an_interruption_is_remembered_by_the_instance_and_the_back_offs() -> None:
    clock, cloud, inst = await _world()
    inst.capacity = "spot"
    backoffs = Backoffs()
    phase = _phase(cloud, backoffs)
    await phase.run(_tick(clock)[0], [inst])
    clock.advance(61)
    await phase.run(_tick(clock)[0], [inst])
    cloud.interrupt(inst.provider_id or "")
    tick, events = _tick(clock)
    await phase.run(tick, [inst])
    assert inst.state is S.TERMINATED and inst.interrupted_at == clock.now() and events.kinds == ["interrupted"]
    assert backoffs.recent_interruptions("web", clock.now()) == 1


async def test_a_webhook_notice_drains_the_instance() -> None:
    clock, cloud, inst = await _world()
    phase = _phase(cloud)
    await phase.run(_tick(clock)[0], [inst])
    inst.notice_at = clock.now()
    tick, events = _tick(clock)
    await phase.run(tick, [inst])
    assert inst.state is S.DRAINING and inst.interrupted and events.kinds == ["draining"]
