"""The plan phase is pure: instances + desired + offers → a Plan. No database, no provider."""

from __future__ import annotations

from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.decide import tier_price_per_hour
from scalectl.controller.reconciler.plan import Create, Drain, instance_price, plan_tier
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity, Offer
from scalectl.tiers.config import TierSpec
from tests.builders import tier_spec

S = InstanceState


def _tier(capacity: str = "on-demand", **fields: object) -> TierSpec:
    return tier_spec(capacity=capacity, providers={"p": {"type": "simulated"}}, **fields)


OD = Offer("p", "od", "H100-SXM5-80GB", 1, "r", 2.0, None)
CHEAP_OD = Offer("p", "od-cheap", "H100-SXM5-80GB", 1, "r", 1.5, None, available_count=1)
SPOT = Offer("p", "spot", "H100-SXM5-80GB", 1, "r", None, 1.0)


def _inst(n: int, state: InstanceState = S.READY, price: float = 2.0, capacity: str = "on-demand", **kw: object):  # type: ignore[no-untyped-def]
    return Instance(
        key=f"k{n}", tier="t", state=state, provider="p", offer_id="od", gpu="H100-SXM5-80GB", region="r",
        capacity=capacity, price_per_hour=price, created_at=float(n), updated_at=float(n), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_scale_out_fills_the_cheapest_offer_up_to_its_room_then_the_next() -> None:
    plan = plan_tier("t", _tier(), [], 3, "busy", [OD, CHEAP_OD], Backoffs(), 0.0)
    assert [c.placement.offer.offer_id for c in plan.creates] == ["od-cheap", "od", "od"]
    assert plan.launched == 3 and plan.drains == [] and all(c.reason == "scale out" for c in plan.creates)


def test_scale_out_stops_at_max_and_at_the_budget_with_a_note() -> None:
    tier = _tier(budget_per_hour=5.0)
    running = [_inst(1)]  # $2/h already billing
    plan = plan_tier("t", tier, running, 4, "busy", [OD], Backoffs(), 0.0)
    assert len(plan.creates) == 1  # 2 + 2 fits under 5; a third would not
    assert [(n.kind, n.message) for n in plan.notes] == [
        (
            "no-placement",
            "cannot place an instance of H100-SXM5-80GB: budget: the tier's budget_per_hour $5/h is reached "
            "($4.00/h billed or planned)",
        )
    ]
    at_max = [_inst(i) for i in range(4)]
    assert plan_tier("t", _tier(), at_max, 9, "busy", [OD], Backoffs(), 0.0).creates == []


def test_with_no_budget_set_a_refusal_never_says_budget() -> None:
    full = Offer("p", "od-full", "H100-SXM5-80GB", 1, "r", 2.0, None, available_count=1)
    plan = plan_tier("t", _tier(min=3), [], 3, "busy", [full], Backoffs(), 0.0)
    assert len(plan.creates) == 1  # the one room the offer has
    [note] = plan.notes
    assert "budget" not in note.message
    assert note.message == (
        "cannot place an instance of H100-SXM5-80GB: no room: the offers report no capacity left for another "
        "instance; the tier is below its floor (0 of min 3)"
    )


def test_scale_in_drains_not_ready_newest_first_then_the_costliest() -> None:
    booting_old, booting_new = _inst(1, S.PROVISIONING), _inst(2, S.BOOTSTRAPPING)
    cheap, dear = _inst(3, price=1.0), _inst(4, price=5.0)
    plan = plan_tier("t", _tier(), [booting_old, booting_new, cheap, dear], 1, "idle", [OD], Backoffs(), 0.0)
    assert [d.instance.key for d in plan.drains] == ["k2", "k1", "k4"]
    assert plan.drains[0].reason == "scale in: idle" and plan.retired == 3 and plan.creates == []


def test_a_tier_in_create_back_off_plans_no_creates() -> None:
    backoffs = Backoffs()
    backoffs.create_refused("t", 0.0)
    assert plan_tier("t", _tier(), [], 2, "busy", [OD], backoffs, 5.0).creates == []
    assert len(plan_tier("t", _tier(), [], 2, "busy", [OD], backoffs, 10.0).creates) == 2


def test_an_offer_out_of_capacity_is_skipped_until_its_mark_expires() -> None:
    backoffs = Backoffs(offer_unavailable_for=180.0)
    backoffs.no_capacity(CHEAP_OD, Capacity.ON_DEMAND, 0.0)
    plan = plan_tier("t", _tier(), [], 1, "busy", [OD, CHEAP_OD], backoffs, 10.0)
    assert [c.placement.offer.offer_id for c in plan.creates] == ["od"]
    later = plan_tier("t", _tier(), [], 1, "busy", [OD, CHEAP_OD], backoffs, 200.0)
    assert [c.placement.offer.offer_id for c in later.creates] == ["od-cheap"]


def test_spot_back_makes_a_surge_below_max_and_drains_first_at_max() -> None:
    tier = _tier("spot", fallback="on-demand")
    fallback = _inst(1, price=2.0, capacity="on-demand")
    plan = plan_tier("t", tier, [fallback], 1, "steady", [SPOT, OD], Backoffs(), 0.0)
    (step,) = plan.rebalances
    assert isinstance(step, Create) and step.surge and step.placement.capacity is Capacity.SPOT
    assert step.reason == "surge: spot is back" and plan.launched == 1
    full = [fallback, *(_inst(i, capacity="spot", price=1.0) for i in range(2, 5))]
    plan = plan_tier("t", tier, full, 4, "steady", [SPOT, OD], Backoffs(), 0.0)
    assert plan.rebalances == [Drain(fallback, "hand back to spot (at max: drain first)")] and plan.retired == 0


def test_no_rebalance_while_spot_is_in_back_off() -> None:
    tier = _tier("spot", fallback="on-demand")
    backoffs = Backoffs()
    for t in (1.0, 2.0, 3.0):
        backoffs.interrupted("t", t)
    assert plan_tier("t", tier, [_inst(1)], 1, "steady", [SPOT, OD], backoffs, 10.0).rebalances == []


def test_one_price_rule_the_next_placement_else_the_catalogue() -> None:
    tier = _tier()
    assert instance_price("t", tier, [OD, CHEAP_OD], Backoffs(), 0.0) == 1.5
    assert instance_price("t", tier, [], Backoffs(), 0.0) == tier_price_per_hour(tier)
