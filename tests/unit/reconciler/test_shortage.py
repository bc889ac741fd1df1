"""Under a capacity shortage the desired count holds what capacity allows (and says so) instead of
flapping between what the policy wants and what the tier has; when capacity returns, it scales out."""

from __future__ import annotations

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Capacity
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import tier, tiers_yaml


async def test_desired_holds_what_capacity_allows_without_flapping() -> None:
    clock = FakeClock()
    options = {"provision_delay_min": 30.0, "provision_delay_max": 30.0}
    cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    policy = {"kind": "scale-to-zero", "queue_per_instance": 10, "activate_after": "0s"}
    text = tiers_yaml({"t": tier(max=8, policy=policy)})
    store.config.apply(parse_config(text, "t"), text, "t", clock.now())
    cloud.set_capacity("H100-SXM5-80GB", 1, capacity=Capacity.ON_DEMAND)  # one machine per region: 2 in all
    signals = StaticSignals(clock)
    signals.set("t", queue_depth=100.0)  # wants 10, capped at max 8
    reconciler = Reconciler(store, {"simulated": cloud}, signals, clock, policy=PolicyRunner())
    desired: list[int] = []
    reasons: list[str] = []
    for _ in range(30):
        report = await reconciler.tick()
        desired.append(report.tiers["t"].desired)
        reasons.append(report.tiers["t"].reason)
        clock.advance(5)
    assert set(desired[10:]) == {2}  # held at what capacity allows, every tick
    assert sum("capacity allows 2" in r for r in reasons[10:]) >= 5  # and said so whenever the policy wanted more
    assert any(e.kind == "no-placement" for e in store.records.events(tier="t"))

    cloud.set_capacity("H100-SXM5-80GB", 100, capacity=Capacity.ON_DEMAND)
    clock.advance(120)  # the offers cache sees it
    for _ in range(12):
        report = await reconciler.tick()
        clock.advance(5)
    assert report.tiers["t"].current == 8
