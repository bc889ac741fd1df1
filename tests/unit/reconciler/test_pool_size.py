"""``warm_pool: {size: auto}``: the pool holds the core's p90 forecast shortfall in instances, within max,
and none when a disk's bill between surprises exceeds what a surprise costs (pool_size.auto_size)."""

from __future__ import annotations

from typing import Any

from scalectl.controller.reconciler.pool_size import auto_size
from scalectl.policies.core.capacity import CapacityState
from scalectl.policies.core.forecast import ErrorTrack
from scalectl.policies.core.pipeline import CoreState, MeasureState
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import TierSpec, parse_config
from tests.builders import min_floor, tier, tiers_yaml

PRICES = {"price_per_hour": 2.4, "storage_per_hour": 0.02, "cold_s": 600.0, "resume_s": 120.0}


def _tier(**pool: Any) -> TierSpec:
    text = tiers_yaml({"web": tier(max=6, policy=min_floor(1, capacity=10), warm_pool={"size": "auto", **pool})})
    return parse_config(text, "tiers.yaml").tiers["web"]


def _state(errors: list[float], prior: float = 8.0) -> PolicyState:
    """A core that sized on ``prior`` req/s per instance (``capacity`` is set: not learned) and measured
    these shortfalls (actual − predicted, req/s)."""
    measure = MeasureState(capacity=CapacityState(prior=prior), sized=ErrorTrack(errors=tuple(errors)))
    return PolicyState(core=CoreState(last_t=0.0, measures={"requests": measure}))


def test_unknown_error_grows_the_pool_by_nothing_and_says_so() -> None:
    for state in (None, PolicyState(), _state([5.0, 5.0])):  # no core, no measure, fewer than five errors
        sized = auto_size(_tier(), state, **PRICES)
        assert sized.size == 0 and "not measured yet" in sized.reason


def test_the_pool_holds_the_p90_shortfall_in_instances_within_max() -> None:
    state = _state([0.0] * 30 + [20.0] * 10)  # p90 20 req/s at 8 req/s an instance: 2.5 → 3
    sized = auto_size(_tier(), state, **PRICES)
    assert sized.size == 3 and "2.50 instances (requests)" in sized.reason
    capped = auto_size(_tier(max=2), state, **PRICES)
    assert capped.size == 2 and "capped at max 2" in capped.reason
    assert auto_size(_tier(), _state([-3.0] * 40), **PRICES).size == 0  # never short: nothing to hold


def test_no_pool_when_a_disks_bill_between_surprises_exceeds_what_a_surprise_costs() -> None:
    # a surprise without a member: 480 s of one GPU at $2.40 = $0.32; 10 surprises over 40 errors 30 s apart:
    # one every 2 min, so a disk at $0.02/h bills $0.0007 meanwhile; at $10/h, $0.33: more than the surprise
    state = _state([0.0] * 30 + [20.0] * 10)
    assert auto_size(_tier(), state, **{**PRICES, "storage_per_hour": 9.0}).size == 3
    sized = auto_size(_tier(), state, **{**PRICES, "storage_per_hour": 10.0})
    assert sized.size == 0 and "no pool" in sized.reason
    unknown = auto_size(_tier(), state, **{**PRICES, "storage_per_hour": None})
    assert unknown.size == 3 and "sized on the error alone" in unknown.reason
