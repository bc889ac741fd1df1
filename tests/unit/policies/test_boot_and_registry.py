"""Measured create→ready time (the default lead time) and the policy-kind registry."""

from __future__ import annotations

import typing

import pytest

from scalectl.policies import boot
from scalectl.policies.core.constants import DEFAULT_HORIZON_S
from scalectl.policies.predictive import lead_time_of
from scalectl.policies.registry import KINDS, kind_of
from scalectl.policies.spec import PolicySpec
from scalectl.tiers.config import ConfigError, parse_config
from tests.unit.policies.helpers import spec


def test_boot_time_is_the_90th_percentile_of_launch_to_ready() -> None:
    learned: dict[str, float] = {}
    learned = boot.observe(learned, now=0, ready=2, current=2, desired=5)  # three launches at t=0
    assert boot.boot_time(learned) is None
    learned = boot.observe(learned, now=120, ready=3, current=5, desired=5)
    learned = boot.observe(learned, now=200, ready=5, current=5, desired=5)
    assert boot.boot_time(learned) == 200  # samples 120, 200, 200
    learned = boot.observe(learned, now=300, ready=5, current=5, desired=8)
    learned = boot.observe(learned, now=310, ready=5, current=8, desired=6)  # one launch withdrawn
    learned = boot.observe(learned, now=400, ready=6, current=6, desired=6)
    assert sorted(v for k, v in learned.items() if k.startswith("boot.s.")) == [100, 120, 200, 200]
    assert not any(k.startswith("boot.p.") for k in learned)


def test_lead_time_is_the_configured_one_else_the_measured_boot_else_five_minutes() -> None:
    window = [{"cron": "0 8 * * *", "until": "18:00", "instances": 2}]
    configured = spec(kind="predictive", lead_time="10m", schedule=window)
    measured = spec(kind="predictive", schedule=window)
    assert lead_time_of(configured, 200.0) == 600  # type: ignore[arg-type]
    assert lead_time_of(measured, 200.0) == 200  # type: ignore[arg-type]
    assert lead_time_of(measured, None) == DEFAULT_HORIZON_S  # type: ignore[arg-type]


def test_the_registry_covers_every_kind_of_the_spec_union() -> None:
    union = typing.get_args(typing.get_args(PolicySpec)[0])
    assert {KINDS[name].spec for name in KINDS} == set(union)
    for name, kind in KINDS.items():
        assert kind.external == (name == "external")
    assert kind_of(spec(kind="scale-to-zero")).name == "scale-to-zero"


def _refusal(policy: str) -> str:
    """The ConfigError a one-tier file with this policy gets (it must get one)."""
    text = f"""
tiers:
  web:
    capacity: on-demand
    gpu: L40S
    providers: [simulated]
    min: 1
    max: 4
    policy: {policy}
"""
    with pytest.raises(ConfigError) as refused:
        parse_config(text, "tiers.yaml")
    return str(refused.value)


def test_config_errors_name_the_field_without_the_kind_tag() -> None:
    assert 'tier "web": policy.scale_in_max_fraction' in _refusal("{kind: min-floor, scale_in_max_fraction: 2}")


def test_a_retired_target_tracking_setting_is_refused_with_what_replaced_it() -> None:
    error = _refusal("{kind: min-floor, target_utilization: 0.75}")
    assert "target_utilization no longer exists: remove it" in error and "measured error" in error


def test_the_retired_threshold_mode_and_its_settings_are_refused_with_what_replaced_them() -> None:
    mode = _refusal("{kind: min-floor, mode: thresholds}")
    assert "`mode: thresholds` was retired" in mode and "remove `mode`" in mode
    setting = _refusal("{kind: min-floor, queue_per_instance: 10}")  # 10 was its default: refused all the same
    assert "queue_per_instance no longer exists: remove it" in setting and "`capacity`" in setting
    nested = _refusal('{kind: predictive, schedule: [{cron: "0 8 * * *", until: "18:00", instances: 2}], '
                      "reactive: {mode: thresholds, cooldown: 5m}}")  # fmt: skip
    assert 'tier "web": policy.reactive' in nested and "`mode: thresholds` was retired" in nested
    forecast = _refusal('{kind: predictive, forecast: {periods: ["1d"]}}')
    assert "`forecast` was retired" in forecast and "remove `forecast`" in forecast


def test_mode_target_is_still_read_and_changes_nothing() -> None:
    assert spec(kind="min-floor", mode="target") == spec(kind="min-floor")
