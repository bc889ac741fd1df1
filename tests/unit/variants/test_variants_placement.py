"""Placement across variants: one order by dollars per primary unit over (variant, offer) pairs; the plan
fills the needed units; a no-capacity answer fails over to the next pair, on another variant."""

from __future__ import annotations

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.controller.reconciler.loop import Reconciler
from scalectl.controller.reconciler.placement import UnavailableOffers, ranked_offers
from scalectl.controller.reconciler.plan import Create, instance_price, plan_tier
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState
from scalectl.policies.types import Decision, PolicyInput
from scalectl.providers.base import Capacity, Offer
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sources.static import StaticSignals
from scalectl.tiers.config import TierSpec, parse_config
from tests.builders import min_floor, tier, tier_spec, tiers_yaml

H100, A100, L40S = "H100-SXM5-80GB", "A100-80GB-PCIe", "L40S-48GB"
VARIANTS = [{"gpu": A100, "gpu_count": 2}, {"gpu": L40S, "gpu_count": 2}]


def _tier(**kw: object) -> TierSpec:
    return tier_spec(H100, variants=VARIANTS, serving={"max_model_len": 5120}, **kw)


def _offer(gpu: str, count: int, price: float, oid: str | None = None) -> Offer:
    return Offer("simulated", oid or f"{gpu}x{count}", gpu, count, "r", price, None)


def test_ranked_by_dollars_per_primary_unit_not_by_price() -> None:
    tier_ = _tier()
    offers = [_offer(H100, 1, 2.40), _offer(A100, 2, 2.08), _offer(L40S, 2, 1.44), _offer(H100, 2, 4.0)]
    ranked = ranked_offers(tier_, offers, UnavailableOffers(), 0.0)
    # the H100x2 offer is not hardware of the tier; the cheapest machine (the L40S pair) is not the best buy
    assert [(p.offer.gpu, p.offer.gpu_count) for p in ranked] == [(H100, 1), (L40S, 2), (A100, 2)]
    assert [p.units for p in ranked] == pytest.approx(
        [1.0, tier_.capacity_units(L40S, 2), tier_.capacity_units(A100, 2)]
    )
    assert ranked[0].per_unit < ranked[1].per_unit < ranked[2].per_unit
    # with H100 dear enough, the L40S pair is the better buy per unit of capacity
    dear = ranked_offers(tier_, [_offer(H100, 1, 9.0), *offers[1:3]], UnavailableOffers(), 0.0)
    assert dear[0].offer.gpu == L40S


def test_a_tier_without_variants_ranks_by_price_on_its_own_hardware() -> None:
    plain = tier_spec(H100)
    offers = [_offer(H100, 1, 2.40, "a"), _offer(H100, 1, 2.10, "b"), _offer(L40S, 2, 1.0)]
    ranked = ranked_offers(plain, offers, UnavailableOffers(), 0.0)
    assert [p.offer.offer_id for p in ranked] == ["b", "a"]
    assert all(p.units == 1.0 for p in ranked)


def test_plan_fills_the_needed_units_and_prices_per_unit() -> None:
    tier_ = _tier(max=40, policy=min_floor(1))
    offers = [_offer(L40S, 2, 1.44)]  # only L40S pairs to be had (an H100 shortage)
    plan = plan_tier("t", tier_, [], 2.0, "r", offers, Backoffs(), 0.0)
    worth = tier_.capacity_units(L40S, 2)
    assert len(plan.creates) == -(-2.0 // worth)  # enough pairs to make up two H100s' worth
    assert instance_price("t", tier_, offers, Backoffs(), 0.0) == pytest.approx(1.44 / worth)


def _inst(key: str, gpu: str, count: int, price: float) -> Instance:
    return Instance(key, "t", InstanceState.READY, "simulated", f"{gpu}x{count}", gpu, "r", "on-demand", price,
                    created_at=0.0, updated_at=0.0, gpu_count=count)  # fmt: skip


def test_scale_in_keeps_the_units_and_retires_the_worst_buy_first() -> None:
    tier_ = _tier(max=40, policy=min_floor(1))
    fleet = [_inst("h1", H100, 1, 2.40), _inst("h2", H100, 1, 2.40)]
    fleet += [_inst(f"l{n}", L40S, 2, 1.44) for n in range(4)]  # ~1.06 H100s' worth
    plan = plan_tier("t", tier_, fleet, 2.0, "scale in", [], Backoffs(), 0.0)
    assert sorted(d.instance.key for d in plan.drains) == ["l0", "l1", "l2", "l3"]  # the H100s are the better buy
    hold = plan_tier("t", tier_, fleet, 2.0 + 4 * tier_.capacity_units(L40S, 2), "hold", [], Backoffs(), 0.0)
    assert not hold.drains and not hold.creates


async def test_no_capacity_on_the_best_variant_fails_over_to_the_next() -> None:
    clock = FakeClock()
    options = {"provision_delay_min": 30.0, "provision_delay_max": 30.0, "regions": ["r1"]}
    cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
    store = Store(make_engine("sqlite://"))
    Base.metadata.create_all(store.engine)
    spec = tier(H100, max=20, policy=min_floor(2), variants=VARIANTS, serving={"max_model_len": 5120})
    text = tiers_yaml({"t": spec})
    store.config.apply(parse_config(text, "t"), text, "t", clock.now())
    reconciler = Reconciler(store, {"simulated": cloud}, StaticSignals(clock), clock, policy=PolicyRunner())
    await reconciler.offers.refresh(store.config.fleet_config().tiers)  # offers seen while H100s were free
    cloud.set_capacity(H100, 0, capacity=Capacity.ON_DEMAND)  # then the H100s run out: creates answer no-capacity
    await reconciler.tick()
    with store.unit_of_work() as uow:
        live = uow.instances.live()
    gpus = sorted({(i.gpu, i.gpu_count) for i in live})
    assert gpus == [(L40S, 2)]  # the next best buy per unit, in the same tick
    tier_ = store.config.fleet_config().tiers["t"]
    assert sum(tier_.capacity_units(i.gpu, i.gpu_count) for i in live) >= 2.0 - 1e-6  # the floor, in units
    kinds = [e.kind for e in store.records.events(tier="t")]
    assert "no-capacity" in kinds


async def test_the_policy_sees_the_fleet_and_its_booting_part_in_primary_units() -> None:
    seen: list[tuple[int, int]] = []

    def decide(_policy: object, inp: PolicyInput, _bounds: object, _external: object) -> Decision:
        seen.append((inp.current, inp.booting))
        return Decision(2, "wants 2", inp.state)

    clock = FakeClock()
    options = {"provision_delay_min": 600.0, "provision_delay_max": 600.0, "regions": ["r1"]}
    cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated", options=options), clock)
    cloud.set_capacity(H100, 0, capacity=Capacity.ON_DEMAND)  # only L40S pairs to be had
    store = Store(make_engine("sqlite://"))
    Base.metadata.create_all(store.engine)
    text = tiers_yaml(
        {"t": tier(H100, max=20, policy=min_floor(0), variants=VARIANTS, serving={"max_model_len": 5120})}
    )
    store.config.apply(parse_config(text, "t"), text, "t", clock.now())
    reconciler = Reconciler(store, {"simulated": cloud}, StaticSignals(clock), clock, policy=PolicyRunner(decide))
    await reconciler.tick()
    clock.advance(5)
    report = await reconciler.tick()
    with store.unit_of_work() as uow:
        pairs = [i for i in uow.instances.live() if i.gpu == L40S]
    assert len(pairs) == 8  # two H100s' worth of L40S pairs, all still booting
    assert seen[-1] == (2, 2)  # not 8 instances, 8 of them booting
    assert report.tiers["t"].launched == 0  # a hold holds: 2 wanted, 2.1 units there


def test_after_a_shortage_the_dearer_variant_is_swapped_for_the_better_buy() -> None:
    tier_ = _tier(max=40, policy=min_floor(1))
    fleet = [_inst("h1", H100, 1, 2.40)] + [_inst(f"l{n}", L40S, 2, 1.44) for n in range(4)]
    offers = [_offer(H100, 1, 2.40), _offer(L40S, 2, 1.44)]
    units = 1 + 4 * tier_.capacity_units(L40S, 2)
    plan = plan_tier("t", tier_, fleet, units, "hold", offers, Backoffs(), 0.0)
    (step,) = plan.rebalances
    assert isinstance(step, Create) and step.surge and step.placement.offer.gpu == H100
    assert "replaces capacity at up to" in step.reason
    # a larger fleet swaps several at once, within the hand-back budget (a quarter of 13 instances: 3)
    big = [_inst("h1", H100, 1, 2.40)] + [_inst(f"l{n}", L40S, 2, 1.44) for n in range(12)]
    many = plan_tier("t", tier_, big, 1 + 12 * tier_.capacity_units(L40S, 2), "hold", offers, Backoffs(), 0.0)
    assert [c.placement.offer.gpu for c in many.rebalances if isinstance(c, Create)] == [H100] * 3
    # not while the dearer part is smaller than what the swap brings (the fleet would grow), nor twice at once
    few = [_inst("h1", H100, 1, 2.40), _inst("l0", L40S, 2, 1.44)]
    assert not plan_tier("t", tier_, few, 1 + tier_.capacity_units(L40S, 2), "hold", offers, Backoffs(), 0.0).rebalances
    surging = [*fleet, _inst("s", H100, 1, 2.40)]
    surging[-1].surge = True
    assert not plan_tier("t", tier_, surging, units, "hold", offers, Backoffs(), 0.0).rebalances
    plain = tier_spec(H100, max=40, policy=min_floor(1))  # without variants: nothing of the kind
    assert not plan_tier("t", plain, [_inst("h1", H100, 1, 2.40)], 1, "hold", offers, Backoffs(), 0.0).rebalances
