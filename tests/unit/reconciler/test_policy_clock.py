"""The policy decides on the reading's clock: the arrivals a reading counts ran up to when it was read, so a
tick whose reads ran long (a slow scrape) must not look like a burst on the tick's own clock."""

from __future__ import annotations

from collections.abc import Sequence

from scalectl.sources.reading import TierReading
from scalectl.sources.spec import SignalsSpec
from tests.unit.reconciler.conftest import World


async def test_the_policy_sees_when_its_tier_was_read_not_when_the_tick_began(make_world) -> None:
    w: World = make_world()
    plain = w.signals.read
    read_at: dict[str, list[float]] = {"web": [], "batch": []}

    async def slow_read(tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        w.clock.advance(2.5)  # the scrape takes 2.5 s
        reading = await plain(tier, spec, endpoints)
        read_at[tier].append(reading.read_at)
        return reading

    w.signals.read = slow_read  # type: ignore[method-assign]
    began = w.clock.now()
    await w.run(2)
    seen = [inp.now for inp in w.script.seen]
    assert len(seen) == 4 and all(t > began for t in seen)
    assert sorted(seen) == sorted(read_at["web"] + read_at["batch"])
