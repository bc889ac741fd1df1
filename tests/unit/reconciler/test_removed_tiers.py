"""A tier removed from the configuration: its instances drain within its own drain timeout (not at once),
the router stops sending to it, and its routing is removed once nothing is left — across a restart too."""

from __future__ import annotations

from typing import Any

from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.store.models import InstanceRecord
from scalectl.tiers.config import parse_config
from tests.builders import tiers_yaml
from tests.unit.reconciler.conftest import WEB, World


def _busy_fleet(w: World, reconciler: Reconciler, routed: list[tuple[str, Any]]) -> None:
    async def drain_check(row: Any) -> float:
        return 2.0  # requests still running, however long we wait

    async def update(name: str, tier: Any, addresses: list[str]) -> None:
        routed.append((name, list(addresses)))

    async def remove(name: str) -> None:
        routed.append((name, None))

    reconciler.drain_check = drain_check
    reconciler.routes.update, reconciler.routes.remove = update, remove


async def _serving_batch(w: World, routed: list[tuple[str, Any]]) -> None:
    _busy_fleet(w, w.reconciler, routed)
    await w.bring_up("batch", 2)
    with w.store.sessions.begin() as s:  # give them addresses so drain checks and routes apply
        for n, row in enumerate(w.rows("batch", ("ready",))):
            s.get(InstanceRecord, row.key).address = f"127.0.0.1:{9000 + n}"  # type: ignore[union-attr]
    await w.run()
    assert routed[-1] == ("batch", ["127.0.0.1:9000", "127.0.0.1:9001"])
    only_web = tiers_yaml({"web": WEB})
    w.store.config.apply(parse_config(only_web, "t.yaml"), only_web, "t.yaml", w.clock.now())


async def test_a_removed_tier_drains_within_its_drain_timeout_then_loses_its_routing(make_world) -> None:
    w: World = make_world()
    routed: list[tuple[str, Any]] = []
    await _serving_batch(w, routed)
    await w.run(20, step=5.0)  # 100 s: busy, and within the tier's drain_timeout (120 s)
    assert len(w.rows("batch", ("draining",))) == 2
    assert ("batch", []) in routed  # the router no longer sends it requests
    await w.run(6, step=5.0)
    ended = w.rows("batch", ("terminated",))
    assert len(ended) == 2 and all("drain timeout 120s passed" in r.reason for r in ended)
    assert routed[-1] == ("batch", None)  # its upstream removed once nothing was left
    assert await w.cloud_live() == []


async def test_after_a_restart_a_removed_tier_keeps_its_drain_timeout(make_world) -> None:
    w: World = make_world()
    routed: list[tuple[str, Any]] = []
    await _serving_batch(w, routed)
    await w.run()
    restarted = Reconciler(w.store, {"simulated": w.cloud}, w.signals, w.clock, policy=PolicyRunner(w.script))
    _busy_fleet(w, restarted, routed)
    for _ in range(18):
        await restarted.tick()
        w.clock.advance(5.0)
    assert len(w.rows("batch", ("draining",))) == 2  # the stored configuration versions still know its timeout
    for _ in range(8):
        await restarted.tick()
        w.clock.advance(5.0)
    assert len(w.rows("batch", ("terminated",))) == 2
