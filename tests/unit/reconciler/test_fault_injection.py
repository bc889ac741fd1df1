"""A tier still reaches its size through provider faults: 20% errors and timeouts on every call,
capacity exhausted on the first two offers, a storm of 429s — within max and budget, with a bounded
number of calls."""

from __future__ import annotations

import random
from typing import Any

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.providers.base import GpuRequest, LaunchSpec, Offer, ProviderInstance
from scalectl.providers.errors import RateLimited, Transient
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import Script

TIERS = tiers_yaml(
    {"web": tier(providers=["flaky"], min=6, max=6, budget_per_hour=15.0, policy=min_floor(6))},
    {"flaky": {"type": "simulated", "options": {"regions": ["r1", "r2", "r3", "r4"]}}},
)


class Flaky:
    """Wraps a cloud: each call fails with probability ``rate`` (a 5xx or a timeout), or with a 429
    while ``storm`` calls remain."""

    capabilities = SimulatedCloud.capabilities  # it is the simulated cloud, only less reliable
    render_launch = staticmethod(SimulatedCloud.render_launch)

    def __init__(self, inner: SimulatedCloud, rate: float, seed: int = 3):
        self.inner, self.name, self.rate = inner, inner.name, rate
        self.rng = random.Random(seed)
        self.calls = 0
        self.storm = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.storm > 0:
            self.storm -= 1
            raise RateLimited("429 Too Many Requests", provider=self.name, retry_after=2.0)
        if self.rng.random() < self.rate:
            raise Transient(self.rng.choice(["502 Bad Gateway", "read timeout"]), provider=self.name)

    async def offers(self, want: GpuRequest) -> list[Offer]:
        self._maybe_fail()
        return await self.inner.offers(want)

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        self._maybe_fail()
        return await self.inner.create(spec)

    async def get(self, provider_id: str) -> ProviderInstance:
        self._maybe_fail()
        return await self.inner.get(provider_id)

    async def list(self, key_prefix: str) -> list[Any]:
        self._maybe_fail()
        return await self.inner.list(key_prefix)

    async def delete(self, provider_id: str) -> None:
        self._maybe_fail()
        await self.inner.delete(provider_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_tier_reaches_its_size_through_faults_within_max_budget_and_bounded_calls() -> None:
    clock = FakeClock()
    cloud = SimulatedCloud(
        ProviderConfig(
            "flaky",
            "simulated",
            options={"regions": ["r1", "r2", "r3", "r4"], "provision_delay_min": 60, "provision_delay_max": 60},
        ),
        clock,
    )
    cloud.set_capacity("H100-SXM5-80GB", 0, region="r1")  # the cheapest-ranked offers are out of stock
    cloud.set_capacity("H100-SXM5-80GB", 0, region="r2")
    flaky = Flaky(cloud, rate=0.2)
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    store.config.apply(parse_config(TIERS, "t.yaml"), TIERS, "t.yaml", clock.now())
    script = Script()
    script.targets["min-floor"] = 6
    reconciler = Reconciler(store, {"flaky": flaky}, StaticSignals(clock), clock, policy=PolicyRunner(script))

    peak_live, peak_spend = 0, 0.0
    flaky.storm = 15  # a 429 storm first
    for _ in range(60):  # 5 minutes of ticks
        await reconciler.tick()
        live = [i for i in await cloud.list("sc-") if not i.status.is_gone]
        peak_live = max(peak_live, len(live))
        peak_spend = max(peak_spend, sum(i.price_per_hour or 0 for i in live))
        clock.advance(5)

    live = [i for i in await cloud.list("sc-") if not i.status.is_gone]
    assert len(live) == 6  # reached its size; $2.40 × 6 = $14.40 fits the $15/h budget
    assert {i.region for i in live} <= {"r3", "r4"}
    assert peak_live <= 6 and peak_spend <= 15.0 + 1e-9  # max and budget held all along
    ready = [r for r in store.reads.instances("web") if r.state == "ready"]
    assert len(ready) == 6
    # Bounded: one list a tick, offers once a minute, and the creates; no retry storm (measured: 81).
    assert flaky.calls <= 2 * 60
    assert len({r.key for r in store.reads.instances("web", include_ended=True)}) == len(
        store.reads.instances("web", include_ended=True)
    )
