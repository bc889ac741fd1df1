"""The fleet-wide budget: user-facing tiers are planned first, the cap holds to the cent across tiers, and a
budget that cannot pay for the floors is refused when the file is loaded."""

from __future__ import annotations

import pytest

from scalectl.tiers.config import parse_config
from scalectl.tiers.errors import ConfigError
from tests.builders import min_floor, tier, tiers_yaml
from tests.unit.reconciler.conftest import World

WEB = tier(max=6, min=1, policy=min_floor(1))  # H100 on-demand, $2.40/h on the simulated cloud
BATCH = tier("A100-80GB-PCIe", capacity="spot", max=8)  # $0.59/h spot


def _tiers(budget: float) -> str:
    text = tiers_yaml({"web": WEB, "batch": BATCH})
    return f"budget_per_hour: {budget}\n{text}"


def _events(w: World, kind: str) -> list[str]:
    return [e.message for e in w.store.records.events(limit=1000) if e.kind == kind]


@pytest.mark.parametrize(("budget", "batch_instances"), [(5.39, 1), (5.38, 0)])
async def test_user_facing_tiers_first_and_the_cap_holds_to_the_cent(
    make_world, budget: float, batch_instances: int
) -> None:
    w: World = make_world(_tiers(budget))
    w.target("web", 2)  # 2 × $2.40 = $4.80
    w.target("batch", 3)  # $0.59 each: one fits in $5.39, none in $5.38
    await w.run()
    assert len(w.rows("web")) == 2
    assert len(w.rows("batch")) == batch_instances
    refused = [m for m in _events(w, "no-placement") if "fleet budget" in m]
    assert refused and "budget" in refused[0]  # counted by scalectl_budget_cap_hits (its rule: "budget")
    billed = sum(r.price_per_hour for r in w.rows())
    assert billed <= budget + 1e-9


async def test_every_tier_floor_is_held_before_another_tier_grows(make_world) -> None:
    batch_floor = tier("A100-80GB-PCIe", capacity="spot", min=1, max=8)
    text = "budget_per_hour: 4.80\n" + tiers_yaml({"web": WEB, "batch": batch_floor})  # floors: $2.99/h
    w: World = make_world(text)
    w.target("web", 2)  # a second $2.40 would eat the batch floor's $0.59
    w.target("batch", 3)
    await w.run()
    assert len(w.rows("web")) == 1  # its floor, and no more: $4.80 - $0.59 held = $4.21 < $4.80
    assert len(w.rows("batch")) == 3  # its floor first, then what the fleet has left ($2.40 / $0.59)
    refused = _events(w, "no-placement")
    assert any("fleet budget $4.8/h is reached" in e and "held for other tiers' floors" in e for e in refused)


def test_a_fleet_budget_below_the_floors_is_refused_naming_the_field() -> None:
    floors = tiers_yaml({"web": tier(max=6, min=2, policy=min_floor(2)), "batch": BATCH})
    parse_config(f"budget_per_hour: 4.80\n{floors}", "tiers.yaml")  # exactly the floors' cost: accepted
    with pytest.raises(ConfigError) as caught:
        parse_config(f"budget_per_hour: 4.79\n{floors}", "tiers.yaml")
    message = str(caught.value)
    assert "budget_per_hour" in message and "web 2 × $2.4" in message and "raise budget_per_hour" in message
