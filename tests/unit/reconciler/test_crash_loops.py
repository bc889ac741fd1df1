"""Crash loops through the reconciler on the simulated cloud: a server that dies right after its machine
starts backs its offer and its tier off, exponentially, and a restarted reconciler remembers."""

from __future__ import annotations

import itertools

from tests.unit.reconciler.conftest import World


async def test_a_crash_looping_server_backs_off_with_growing_gaps(make_world) -> None:
    w: World = make_world(provision_delay_min=1.0, provision_delay_max=1.0)
    w.target("web", 1)
    launches: list[float] = []
    seen: set[str] = set()
    for _ in range(120):  # two minutes of 1 s ticks; every server dies as soon as its machine runs
        await w.run(step=1.0)
        for row in w.rows("web"):
            if row.provider_id and row.key not in seen:
                seen.add(row.key)
                launches.append(row.created_at)
        for inst in await w.cloud_live():
            if inst.status.value == "running":
                w.cloud.set_raw_status(inst.provider_id, "failed")
    first_minute = [t for t in launches if t - launches[0] < 60]
    assert 2 <= len(first_minute) <= 4
    gaps = [b - a for a, b in itertools.pairwise(launches)]
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps))  # growing gaps
    events = [e for e in w.store.records.events(tier="web") if e.kind == "crash-backoff"]
    assert events and "early failure" in events[-1].message


async def test_crash_back_offs_survive_a_restart(make_world) -> None:
    from scalectl.controller.reconciler.decide import PolicyRunner
    from scalectl.controller.reconciler.loop import Reconciler

    w: World = make_world(provision_delay_min=1.0, provision_delay_max=1.0)
    w.target("web", 1)
    for _ in range(30):
        await w.run(step=1.0)
        for inst in await w.cloud_live():
            if inst.status.value == "running":
                w.cloud.set_raw_status(inst.provider_id, "failed")
    before = len(w.rows("web"))
    restarted = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    assert restarted.backoffs.creates_blocked("web", w.clock.now()) is False  # not loaded before a tick
    await restarted.tick()
    assert restarted.backoffs.creates_blocked("web", w.clock.now())  # remembered from the stored events
    assert len(w.rows("web")) == before  # no launch on the first tick after the restart
