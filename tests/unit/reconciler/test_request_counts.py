"""The reconciler counts each tier's requests per minute from its readings; status divides the last hour's
bill by them (cost per 1,000 requests)."""

from __future__ import annotations

import pytest

from scalectl.controller.reconciler.request_counts import RequestCounts
from scalectl.controller.views.status import fleet_status
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

WEB = tier(max=6, min=1, policy=min_floor(1))
BATCH = tier("A100-80GB-PCIe", capacity="spot", max=8)


async def test_cost_per_1000_requests_from_the_counted_arrivals(make_world) -> None:
    w: World = make_world(tiers_yaml({"web": WEB, "batch": BATCH}))
    w.target("web", 2)
    w.signals.set("web", arrivals=50.0)  # per 5-second tick: 600 a minute
    await w.run(540, step=5.0)  # 45 minutes: enough of the last hour was read
    now = w.clock.now()
    rows = {r["tier"]: r for r in fleet_status(w.store.reads, now)}
    counted = sum(w.store.records.requests_by_minute(now - 3600, now)["web"].values())
    assert 600 * 44 <= counted <= 600 * 45  # whole minutes are written; the one in progress is not yet
    billed = sum(r.price_per_hour * (now - (r.launched_at or r.created_at)) / 3600 for r in w.rows("web"))
    assert rows["web"]["cost_per_1k_requests"] == pytest.approx(billed / counted * 1000, rel=0.001)
    assert rows["batch"]["cost_per_1k_requests"] is None  # nothing counted: unknown, not zero
    assert fleet_status(w.store.reads)[0]["cost_per_1k_requests"] is None  # no clock given: not computed


def test_a_minute_is_written_once_it_is_over() -> None:
    counts = RequestCounts()
    assert counts.add("web", 59.0, 10) is None
    assert counts.add("web", 59.9, 5) is None
    assert counts.add("batch", 60.0, 7) is None  # tiers count apart
    assert counts.add("web", 60.0, 3) == (0, 15)  # minute 0 is over: 15 requests
    assert counts.add("web", 125.0, 1) == (1, 3)
