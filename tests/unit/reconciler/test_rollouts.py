"""Rolling replacement on the simulated cloud: a changed server description (or `scalectl rollout restart`)
replaces every instance one surge at a time without the ready count dropping below the policy's need;
pause holds it; a failing new server stops it; at max it drains first; max_disrupted bounds scale-in."""

from __future__ import annotations

from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

LIVE = ("pending", "provisioning", "bootstrapping", "ready", "draining")


def web(**fields: object) -> dict[str, object]:
    return tier(max=6, policy=min_floor(0), **fields)


def _apply(w: World, text: str) -> None:
    w.store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", w.clock.now())


async def _run_watching(w: World, ticks: int) -> tuple[int, int]:
    lowest, most = 10**6, 0
    for _ in range(ticks):
        await w.run()
        rows = w.rows("web", LIVE)
        lowest = min(lowest, sum(r.state == "ready" for r in rows))
        most = max(most, len(rows))
    return lowest, most


def _servers(w: World) -> set[str | None]:
    return {r.server_hash for r in w.rows("web", ("ready",))}


async def test_a_changed_server_replaces_every_instance_one_surge_at_a_time(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web()}))
    await w.bring_up("web", 3)
    before = _servers(w)
    assert len(w.rows("web", ("ready",))) == 3 and len(before) == 1 and None not in before
    _apply(w, tiers_yaml({"web": web(serving={"extra_args": ["--max-num-seqs", "128"]})}))
    lowest, most = await _run_watching(w, 120)  # 10 minutes: three 60-second boots and their drains
    after = _servers(w)
    assert len(w.rows("web", ("ready",))) == 3 and len(after) == 1 and after.isdisjoint(before)
    assert lowest >= 3  # never below what the policy needs
    assert most <= 4  # desired + max_surge (1)
    assert any("rollout: replaced by" in e.message for e in w.store.records.events(tier="web", limit=1000))


async def test_restart_replaces_all_and_pause_holds(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web()}))
    await w.bring_up("web", 2)
    before = _servers(w)
    w.store.rollouts.set("web", w.clock.now(), restart=True, paused=True)
    await _run_watching(w, 30)
    assert _servers(w) == before and not any(r.surge for r in w.rows("web", LIVE))  # paused: nothing moves
    w.store.rollouts.set("web", w.clock.now(), paused=False)
    lowest, _ = await _run_watching(w, 90)
    assert _servers(w).isdisjoint(before) and lowest >= 2
    kinds = {e.kind for e in w.store.records.events(tier="web", limit=1000)}
    assert {"rollout-restart", "rollout-resumed"} <= kinds


async def test_a_new_server_that_fails_stops_the_rollout_and_keeps_the_old_instances(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web()}))
    await w.bring_up("web", 3)
    old = {r.key for r in w.rows("web", ("ready",))}
    _apply(w, tiers_yaml({"web": web(serving={"image": "vllm/vllm-openai:does-not-exist"})}))
    await w.run()
    (surge,) = [r for r in w.rows("web", LIVE) if r.surge]
    w.cloud.set_raw_status(surge.provider_id or "", "failed")  # the new server dies
    await _run_watching(w, 60)
    assert {r.key for r in w.rows("web", ("ready",))} == old  # the old fleet keeps serving
    assert not any(r.surge for r in w.rows("web", LIVE))  # no second attempt: no fleet-wide crash loop
    stopped = [e.message for e in w.store.records.events(tier="web", limit=1000) if e.kind == "rollout-stopped"]
    assert stopped and "rollout stopped" in stopped[0] and "3 instances keep the old one" in stopped[0]


async def test_at_max_a_drifted_instance_drains_first(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": tier(max=2, policy=min_floor(0))}))
    await w.bring_up("web", 2)
    before = _servers(w)
    _apply(w, tiers_yaml({"web": tier(max=2, policy=min_floor(0), serving={"max_model_len": 8192})}))
    _, most = await _run_watching(w, 120)
    assert most <= 2 and _servers(w).isdisjoint(before) and len(w.rows("web", ("ready",))) == 2


async def test_max_disrupted_bounds_a_scale_in(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web(max_disrupted=1)}))
    await w.bring_up("web", 4)
    w.target("web", 1)
    await w.run()
    assert sum(r.state == "draining" for r in w.rows("web", LIVE)) <= 1
    await w.run(40)
    assert len(w.rows("web", ("ready",))) == 1  # all the way down, one at a time


# A window that is open from the world's start for an hour, every day (FakeClock starts at a fixed epoch).
def _window_now(w: World, budget: object = 0, hours: int = 1) -> dict[str, object]:
    from datetime import UTC, datetime

    opened = datetime.fromtimestamp(w.clock.now(), UTC)
    cron = f"{opened.minute} {opened.hour} * * *"
    return {"cron": cron, "duration": f"{hours}h", "max_disrupted": budget}


async def test_an_open_disruption_window_holds_scale_in_and_says_so_then_lets_it_go(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web()}))
    await w.bring_up("web", 4)
    _apply(w, tiers_yaml({"web": web(disruption_windows=[_window_now(w, 0, hours=2)])}))
    w.target("web", 1)
    await w.run(20)
    assert sum(r.state == "draining" for r in w.rows("web", LIVE)) == 0
    assert len(w.rows("web", ("ready",))) == 4
    notes = [e.message for e in w.store.records.events(tier="web", limit=100) if e.kind == "disruption-window"]
    assert notes and "scale-in to 1 waits: max_disrupted 0 in the window" in notes[0]
    w.clock.advance(2 * 3600)  # the window has closed
    await w.run(40)
    assert len(w.rows("web", ("ready",))) == 1


async def test_an_open_disruption_window_holds_a_rollout_until_it_closes(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": web()}))
    await w.bring_up("web", 3)
    before = _servers(w)
    window = _window_now(w, 0, hours=1)
    changed = {"serving": {"extra_args": ["--max-num-seqs", "128"]}}
    _apply(w, tiers_yaml({"web": web(disruption_windows=[window], **changed)}))
    await _run_watching(w, 60)
    assert _servers(w) == before and not any(r.surge for r in w.rows("web", LIVE))
    assert any(
        e.kind == "disruption-window" and "rollout waits (3 drifted)" in e.message
        for e in w.store.records.events(tier="web", limit=100)
    )
    w.clock.advance(3600)
    lowest, _ = await _run_watching(w, 120)
    assert _servers(w).isdisjoint(before) and lowest >= 3
