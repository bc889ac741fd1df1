"""A provider that declares ``idle_list_every`` is listed less often while every instance of ours there is
ready, and at once again when anything is in motion (a notice, a create, a drain)."""

from __future__ import annotations

import dataclasses

from tests.unit.reconciler.conftest import World


async def test_an_idle_provider_is_listed_less_often_and_at_once_when_a_notice_comes(make_world) -> None:
    w: World = make_world()
    w.cloud.capabilities = dataclasses.replace(w.cloud.capabilities, idle_list_every=20.0)  # type: ignore[misc]
    w.target("batch", 2)
    await w.run()
    w.clock.advance(61)
    await w.run(2)  # booting: listed every tick
    assert len(w.rows("batch", ("ready",))) == 2
    before = w.cloud.calls["list"]
    await w.run(12)  # a minute of 5 s ticks, all ready
    assert w.cloud.calls["list"] - before == 3  # every 20 s instead of every 5 s
    victim = w.rows("batch", ("ready",))[0]
    assert w.store.failures.mark_notice("simulated", victim.provider_id, None, w.clock.now()) == victim.key
    before = w.cloud.calls["list"]
    await w.reconciler.tick()
    assert w.cloud.calls["list"] - before == 1  # a notice is motion: listed, drained and replaced this tick
    assert len(w.rows("batch", ("provisioning",))) == 1
