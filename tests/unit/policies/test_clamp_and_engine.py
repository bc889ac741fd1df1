"""Clamp (min, max, budget — the budget wins over min) and the engine's change bookkeeping."""

from __future__ import annotations

import pytest

from scalectl.policies.clamp import clamp, max_affordable
from scalectl.policies.engine import decide
from scalectl.policies.types import Bounds, PolicyInput, PolicyState, Signals
from tests.unit.policies.helpers import T0, Runner, spec


def test_below_min_is_raised_and_above_max_is_capped() -> None:
    assert clamp(0, Bounds(min=2, max=5)) == (2, ["raised to tier min 2"])
    assert clamp(9, Bounds(min=2, max=5)) == (5, ["capped at tier max 5"])
    assert clamp(3, Bounds(min=2, max=5)) == (3, [])


def test_budget_caps_at_floor_of_budget_over_price() -> None:
    bounds = Bounds(min=0, max=50, budget_per_hour=10.0, price_per_instance_hour=2.40)
    assert max_affordable(bounds) == 4
    value, notes = clamp(7, bounds)
    assert value == 4
    assert notes == ["capped at 4 by the budget $10/h ÷ $2.4/h per instance"]


def test_budget_that_exactly_affords_n_allows_n_despite_float_division() -> None:
    assert max_affordable(Bounds(min=0, max=50, budget_per_hour=9.6, price_per_instance_hour=2.4)) == 4
    assert max_affordable(Bounds(min=0, max=50, budget_per_hour=0.3, price_per_instance_hour=0.1)) == 3


def test_budget_wins_over_min_and_the_reason_says_so() -> None:
    bounds = Bounds(min=3, max=10, budget_per_hour=5.0, price_per_instance_hour=2.40)
    value, notes = clamp(1, bounds)
    assert value == 2
    assert "raised to tier min 3" in notes[0]
    assert "below tier min 3: the budget is a hard money cap and wins" in notes[1]


def test_no_budget_or_no_price_means_no_money_cap() -> None:
    assert max_affordable(Bounds(min=0, max=5)) is None
    assert max_affordable(Bounds(min=0, max=5, budget_per_hour=10.0)) is None
    assert clamp(5, Bounds(min=0, max=5, budget_per_hour=1.0)) == (5, [])


def test_engine_appends_clamp_notes_to_the_policy_reason() -> None:
    bounds = Bounds(min=0, max=50, budget_per_hour=10.0, price_per_instance_hour=2.40)
    run = Runner(spec(kind="scale-to-zero"), bounds=bounds)
    run.tick(0, queue_depth=1000, in_flight=0)
    decision = run.tick(30, queue_depth=1000, in_flight=0)
    assert decision.desired == 4
    assert decision.reason == (
        "queue 1000 > 20 × 0 for 30s → 50; capped at 4 by the budget $10/h ÷ $2.4/h per instance → 4"
    )


def test_engine_records_last_change_only_when_the_count_moves() -> None:
    policy = spec(kind="min-floor", floor=1)
    first = decide(policy, PolicyInput(T0, Signals(queue_depth=5), 1, PolicyState()), Bounds(min=1, max=9))
    assert first.state.last_change is None
    assert first.state.last_desired == 1
    moved = decide(policy, PolicyInput(T0 + 1, Signals(queue_depth=5), 0, first.state), Bounds(min=1, max=9))
    assert moved.desired == 1  # current 0 raised to the floor; the *decision* did not move
    assert moved.state.last_change is None
    raised = decide(policy, PolicyInput(T0 + 2, Signals(queue_depth=5), 1, moved.state), Bounds(min=3, max=9))
    assert raised.desired == 3
    assert raised.state.last_change == T0 + 2


def test_external_spec_without_a_loaded_policy_is_a_programming_error() -> None:
    policy = spec(kind="external", **{"class": "examples.policies.target_tracking:RequestRateTargetTracking"})
    with pytest.raises(ValueError, match="load_external_policy"):
        decide(policy, PolicyInput(T0, Signals(), 1, PolicyState()), Bounds(min=0, max=5))


def test_state_round_trips_through_plain_data() -> None:
    state = PolicyState(since={"below": T0}, last_change=T0 - 5, last_desired=3, peaks={"below": 12.0})
    assert PolicyState.from_dict(state.to_dict()) == state
    assert PolicyState.from_dict({"since": {}, "last_change": None, "last_desired": None}) == PolicyState()
