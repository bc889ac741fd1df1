"""The sync phase on the simulated cloud, without a database: a stub unit of work collects the events."""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any

from scalectl.clocks import FakeClock
from scalectl.controller.provider_proxy import ProviderProxy, as_provider
from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.calls import Calls
from scalectl.controller.reconciler.report import TickReport
from scalectl.controller.reconciler.sync import SyncPhase, adopt
from scalectl.controller.reconciler.tick import Tick
from scalectl.domain.instance import Instance, InstanceEvent, InstanceState
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec, ProviderInstance
from scalectl.providers.errors import InstanceNotFound, Transient
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


class Lagging(ProviderProxy):
    """A cloud that lists and gets a new machine ``lag`` seconds late (and declares it as its listing lag);
    a machine ``forgotten`` is neither listed nor found at all (deleted, and its record gone)."""

    def __init__(self, inner: SimulatedCloud, clock: FakeClock, lag: float) -> None:
        super().__init__(inner)
        self.clock, self.lag = clock, lag
        self.capabilities = dataclasses.replace(inner.capabilities, listing_lag=lag)
        self.forgotten: set[str] = set()

    def _shown(self, inst: ProviderInstance) -> bool:
        if inst.provider_id in self.forgotten:
            return False
        return inst.created_at is None or inst.created_at <= self.clock.now() - self.lag

    async def list(self, key_prefix: str) -> builtins.list[ProviderInstance]:
        return [i for i in await self.inner.list(key_prefix) if self._shown(i)]

    async def get(self, provider_id: str) -> ProviderInstance:
        found = await self.inner.get(provider_id)
        if not self._shown(found):
            raise InstanceNotFound(f"no instance {provider_id}", provider=self.name)
        return found


async def _made_and_answered(lag: float) -> tuple[FakeClock, Lagging, SyncPhase, Instance]:
    """An instance whose create was answered (it holds the provider id) on a cloud that lags ``lag`` s."""
    clock, cloud, inst = await _world()
    (made,) = await cloud.list("sc-")
    adopt(inst, made, clock.now())  # what the create phase does with the create's answer
    lagging = Lagging(cloud, clock, lag)
    return clock, lagging, SyncPhase({"sim": as_provider(lagging)}, Calls(), Backoffs(), "sc-", None), inst


async def test_a_fresh_machine_neither_listed_nor_found_yet_is_kept_within_the_listing_lag() -> None:
    clock, cloud, phase, inst = await _made_and_answered(lag=30.0)
    clock.advance(5)
    tick, events = _tick(clock)
    await phase.run(tick, [inst])  # not listed, and the get answers not found: the cloud has not caught up
    assert inst.state is S.PROVISIONING and events.kinds == [], (inst.state, inst.reason)
    assert "5s after its create" in inst.reason and "30s" in inst.reason and "listing lag" in inst.reason
    clock.advance(56)  # listed now, and booted
    tick, events = _tick(clock)
    await phase.run(tick, [inst])
    assert inst.state is S.READY and events.kinds == ["ready"]
    assert len([i for i in await cloud.inner.list("sc-") if not i.status.is_gone]) == 1


async def test_after_the_listing_lag_not_found_is_gone() -> None:
    clock, cloud, phase, inst = await _made_and_answered(lag=30.0)
    cloud.forgotten.add(inst.provider_id or "")  # really gone at the provider, before any listing showed it
    clock.advance(10)
    await phase.run(_tick(clock)[0], [inst])
    assert inst.state is S.PROVISIONING  # inside the lag: indistinguishable from a fresh one, kept
    clock.advance(21)
    tick, events = _tick(clock)
    await phase.run(tick, [inst])
    assert inst.state is S.FAILED and "lost" in events.kinds and "not found" in inst.reason
