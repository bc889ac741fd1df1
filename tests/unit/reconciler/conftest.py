"""A reconciler on a fake clock, in-memory SQLite and the simulated cloud, with a scripted policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import select

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.policies.types import Bounds, Decision, PolicyInput
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

WEB = tier(max=6, launch_timeout="10m", policy=min_floor(0))
BATCH = tier("A100-80GB-PCIe", capacity="spot", fallback="on-demand", max=8)
TIERS = tiers_yaml({"web": WEB, "batch": BATCH})


class Script:
    """A policy that answers what the test says: ``targets[tier]`` (or raises ``error``)."""

    def __init__(self) -> None:
        self.targets: dict[str, int] = {}
        self.error: Exception | None = None
        self.seen: list[PolicyInput] = []

    def __call__(self, spec: Any, inp: PolicyInput, bounds: Bounds, external: Any) -> Decision:
        self.seen.append(inp)
        if self.error is not None:
            raise self.error
        want = self.targets.get(getattr(spec, "kind", ""), inp.current)
        return Decision(desired=want, reason=f"scripted {want}", state=inp.state)


@dataclass
class World:
    clock: FakeClock
    cloud: SimulatedCloud
    store: Store
    signals: StaticSignals
    script: Script
    reconciler: Reconciler
    extra: dict[str, Any] = field(default_factory=dict)

    def target(self, tier: str, n: int) -> None:
        kind = {"web": "min-floor", "batch": "scale-to-zero"}[tier]
        self.script.targets[kind] = n

    def rows(self, tier: str | None = None, states: tuple[str, ...] | None = None) -> list[InstanceRecord]:
        with self.store.sessions() as s:
            q = select(InstanceRecord)
            if tier:
                q = q.where(InstanceRecord.tier == tier)
            rows = list(s.scalars(q).all())
        return [r for r in rows if states is None or r.state in states]

    async def run(self, ticks: int = 1, step: float = 5.0) -> None:
        for _ in range(ticks):
            await self.reconciler.tick()
            self.clock.advance(step)

    async def bring_up(self, tier: str, n: int) -> None:
        """Ask for ``n`` instances and tick past the simulated boot, so they are ready."""
        self.target(tier, n)
        await self.run()
        self.clock.advance(61)
        await self.run()

    async def cloud_live(self) -> list[Any]:
        return [i for i in await self.cloud.list("sc-") if not i.status.is_gone]


@pytest.fixture
def make_world() -> Callable[..., World]:
    def build(tiers: str = TIERS, **cloud_options: Any) -> World:
        clock = FakeClock()
        options = {"provision_delay_min": 60.0, "provision_delay_max": 60.0, **cloud_options}
        cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
        engine = make_engine("sqlite://")
        Base.metadata.create_all(engine)
        store = Store(engine)
        fleet = parse_config(tiers, "tiers.yaml")
        store.config.apply(fleet, tiers, "tiers.yaml", clock.now())
        script = Script()
        signals = StaticSignals(clock)
        reconciler = Reconciler(store, {"simulated": cloud}, signals, clock, policy=PolicyRunner(script))
        return World(clock, cloud, store, signals, script, reconciler)

    return build
