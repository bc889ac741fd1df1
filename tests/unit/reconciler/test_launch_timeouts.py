"""Launch timeouts through the reconciler on the simulated cloud: a machine that never starts is retried
with growing back-off, like a crash loop (its offer skipped, the tier's creates waiting), with an event that
says why, and a restarted reconciler remembers."""

from __future__ import annotations

import itertools

from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

NEVER_UP = tiers_yaml({"web": tier(max=3, launch_timeout="20s", policy=min_floor(0))})


async def _launches(w: World, seconds: int) -> list[float]:
    launches: list[float] = []
    seen: set[str] = set()
    for _ in range(seconds):  # 1 s ticks; no machine ever reaches running
        await w.run(step=1.0)
        for row in w.rows("web"):
            if row.key not in seen:
                seen.add(row.key)
                launches.append(row.created_at)
    return launches


async def test_a_machine_that_never_starts_is_relaunched_with_growing_gaps(make_world) -> None:
    w: World = make_world(NEVER_UP, provision_delay_min=1e9, provision_delay_max=1e9)
    w.target("web", 1)
    launches = await _launches(w, 600)
    gaps = [b - a for a, b in itertools.pairwise(launches)]
    assert len(gaps) >= 3, launches
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps)), gaps  # growing gaps
    assert len(launches) <= 10, launches  # without back-off: one every ~21 s, 28 in ten minutes
    events = [e for e in w.store.records.events(tier="web") if e.kind == "crash-backoff"]
    assert events and "launch timeout" in events[-1].message


async def test_launch_timeout_back_offs_survive_a_restart(make_world) -> None:
    w: World = make_world(NEVER_UP, provision_delay_min=1e9, provision_delay_max=1e9)
    w.target("web", 1)
    await _launches(w, 60)
    before = len(w.rows("web"))
    restarted = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    await restarted.tick()
    assert restarted.backoffs.creates_blocked("web", w.clock.now())  # remembered from the stored events
    assert len(w.rows("web")) == before  # no launch on the first tick after the restart
