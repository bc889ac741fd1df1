"""One hung provider account and one healthy one, the real reconciler and the daemon's call deadlines:
after the tick that finds the hang, a healthy tier's create goes out without waiting on the hung account.

Hang guards only: the assertions are about order (the hung account's call still waiting when the healthy
tier's create is sent), never about how long anything took."""

from __future__ import annotations

from scalectl.clocks import FakeClock
from scalectl.controller.call_deadline import DeadlineProvider
from scalectl.controller.provider_proxy import as_provider
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.fakes.hanging_provider import HangingProvider

FAST = {"provision_delay_min": 1.0, "provision_delay_max": 1.0}


def _config(healthy: int) -> str:
    return tiers_yaml(
        {
            "slow": tier(providers=["a"], min=1, max=4, policy=min_floor(1)),
            "healthy": tier(providers=["b"], min=healthy, max=4, policy=min_floor(healthy)),
        },
        {"a": {"type": "simulated", "options": FAST}, "b": {"type": "simulated", "options": FAST}},
    )


async def test_after_a_hang_is_found_a_healthy_tier_creates_while_the_hung_account_is_still_waited_on() -> None:
    clock = FakeClock()
    cloud_a = HangingProvider(SimulatedCloud(ProviderConfig(name="a", type="simulated", options=FAST), clock))
    cloud_b = HangingProvider(SimulatedCloud(ProviderConfig(name="b", type="simulated", options=FAST), clock))
    a = DeadlineProvider(as_provider(cloud_a), 0.2, clock)  # the daemon wraps every account so
    b = DeadlineProvider(as_provider(cloud_b), 0.2, clock)
    waiting_on_a: list[int] = []  # the hung account's calls in flight as each of B's creates goes out
    cloud_b.on_call = lambda op: waiting_on_a.append(cloud_a.in_flight) if op == "create" else None

    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)

    def apply(healthy: int) -> None:
        text = _config(healthy)
        store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", clock.now())

    apply(1)
    providers = {"a": as_provider(a), "b": as_provider(b)}
    reconciler = Reconciler(store, providers, StaticSignals(clock), clock, policy=PolicyRunner())
    try:
        await reconciler.tick()  # one instance each
        clock.advance(5)
        await reconciler.tick()
        assert waiting_on_a == [0]

        cloud_a.hang = True  # account A's API stops answering
        apply(2)
        report = await reconciler.tick()  # finds the hang: waits out one deadline on A
        assert "a" in report.provider_errors and "no answer within 0.2s" in report.provider_errors["a"]
        assert waiting_on_a == [0, 0]

        # Long past the old quiet window (one deadline, on the clock the wrapper reads), with a deadline
        # that would hold the tick 20 s if anything waited on A again.
        clock.advance(60)
        a.deadline = b.deadline = 20.0
        apply(3)
        report = await reconciler.tick()
        assert "not sent" in report.provider_errors["a"], report.provider_errors
        assert waiting_on_a == [0, 0, 1]  # B's create went out while A's probe was still waiting
        assert len([i for i in await cloud_b.inner.list("sc-") if not i.status.is_gone]) == 3
    finally:
        await a.aclose()
        await b.aclose()
