"""PolicyRunner keeps demand history as far back as each tier's forecast looks, and only for those."""

from __future__ import annotations

from scalectl.controller.reconciler.decide import PolicyRunner
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

FORTNIGHTLY = {
    "kind": "predictive",
    "headroom": 0,
    "lead_time": 0,
    "reactive": {"mode": "thresholds"},
    "forecast": {"periods": ["14d"], "horizon": "10m"},
}
TIERS = tiers_yaml(
    {"fortnightly": tier("L40S", max=40, policy=FORTNIGHTLY), "plain": tier("L40S", policy=min_floor(0))}
)


def test_history_reaches_as_far_as_the_longest_forecast_period() -> None:
    tiers = parse_config(TIERS, "t.yaml").tiers
    runner = PolicyRunner()
    assert runner.history_reach(tiers) == 14 * 86400 + 600
    t0 = 1_767_225_600.0
    runner.seed_history([("fortnightly", t0, 12.0), ("plain", t0, 3.0)], tiers)
    history = runner.history_for("fortnightly", tiers["fortnightly"])
    assert history is not None
    history.append(t0 + 13 * 86400, 5.0)  # the daemon keeps recording; older entries expire as it does
    seasonal = runner.seasonal("fortnightly", tiers["fortnightly"], t0 + 14 * 86400)
    assert seasonal.by_period == {14 * 86400.0: 12.0}  # a fixed 8-day memory would have dropped it
    assert runner.history_for("plain", tiers["plain"]) is None  # nothing kept where nothing forecasts


def test_a_forecasting_tier_gets_its_history_before_any_boot_is_measured() -> None:
    """The runner fills the boot horizon from the boot model when nothing is measured; the seasonal history a
    thresholds forecast reads must still be filled (it was skipped once the horizon was set)."""
    from scalectl.policies.types import PolicyInput, PolicyState, Signals

    tiers = parse_config(TIERS, "t.yaml").tiers
    runner = PolicyRunner()
    t0 = 1_767_225_600.0
    runner.seed_history([("fortnightly", t0, 12.0)], tiers)
    inp = PolicyInput(t0 + 14 * 86400, Signals(queue_depth=0, in_flight=0), 1, PolicyState())
    decision = runner.decide("fortnightly", tiers["fortnightly"], inp)
    assert "forecast: peak 12 14d ago" in decision.reason, decision.reason
