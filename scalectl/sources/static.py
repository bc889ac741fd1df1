"""A signal source that returns what it is told: for tests, demos and dry runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scalectl.clocks import Clock
from scalectl.policies.types import Signals
from scalectl.sources.reading import TierReading
from scalectl.sources.spec import SignalsSpec


class StaticSignals:
    """Returns ``values[tier]`` (unknown for tiers not given). Change ``values`` between ticks."""

    def __init__(self, clock: Clock, values: Mapping[str, Signals] | None = None):
        self.clock = clock
        self.values: dict[str, Signals] = dict(values or {})
        self.errors: dict[str, dict[str, str]] = {}

    def set(self, tier: str, **figures: float | None) -> None:
        self.values[tier] = Signals(**figures)  # type: ignore[arg-type]

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        return TierReading(self.values.get(tier, Signals()), self.clock.now(), self.errors.get(tier, {}))

    async def aclose(self) -> None:
        return None
