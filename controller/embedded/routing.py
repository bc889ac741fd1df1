"""Which tiers read the synthetic demo load: those that run only on the simulated cloud and name no
signal source (there is nothing real to read for them). Every other tier reads its configured sources.
Deciding per tier, from the configuration in force, keeps the demo's load after `scalectl apply` and a
restart, and lets a real tier run beside simulated ones."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scalectl.sources.reading import SignalSource, TierReading
from scalectl.sources.spec import SignalsSpec, has_source
from scalectl.tiers.config import FleetConfig


def reads_synthetic_load(fleet: FleetConfig, tier: str) -> bool:
    spec = fleet.tiers.get(tier)
    if spec is None or has_source(spec.signals):
        return False
    return all(p == "simulated" and p not in fleet.providers for p in spec.providers)


class DemoOrRealSignals:
    def __init__(self, synthetic: SignalSource, real: SignalSource, fleet: Callable[[], FleetConfig]):
        self.synthetic = synthetic
        self.real = real
        self.fleet = fleet

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        source = self.synthetic if reads_synthetic_load(self.fleet(), tier) else self.real
        return await source.read(tier, spec, endpoints)

    async def aclose(self) -> None:
        await self.synthetic.aclose()
        await self.real.aclose()
