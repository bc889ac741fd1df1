"""The tier field ``warm_pool``: what it accepts, and refusals that name the file, the field and the fix."""

from __future__ import annotations

import pytest

from scalectl.tiers.config import ConfigError, parse_config
from tests.builders import tier, tiers_yaml


def _parse(spec: dict[str, object], providers: dict[str, object] | None = None) -> object:
    return parse_config(tiers_yaml({"web": spec}, providers), "tiers.yaml").tiers["web"]  # type: ignore[arg-type]


def test_a_pool_on_a_tier_that_can_stop_parses_with_its_defaults() -> None:
    spec = _parse(tier(max=4, warm_pool={"size": 2}))
    pool = spec.warm_pool  # type: ignore[attr-defined]
    assert (pool.size, pool.max, pool.most, pool.resume_timeout) == (2, None, 2, 300.0)
    spec = _parse(tier(max=4, warm_pool={"size": 1, "max": 3, "resume_timeout": "2m"}))
    pool = spec.warm_pool  # type: ignore[attr-defined]
    assert (pool.most, pool.resume_timeout) == (3, 120.0)
    assert _parse(tier()).warm_pool is None  # type: ignore[attr-defined]


def test_a_pool_needs_one_provider_that_stops_and_one_listed_is_enough() -> None:
    providers = {"lam": {"type": "lambda"}}
    with pytest.raises(ConfigError) as raised:
        _parse(tier(providers=["lam"], warm_pool={"size": 1}), providers)
    message = str(raised.value)
    assert message.startswith('tiers.yaml: tier "web": warm_pool: none of the tier\'s providers can stop')
    assert "lam (lambda)" in message and "remove warm_pool" in message
    spec = _parse(tier(providers=["lam", "simulated"], warm_pool={"size": 1}), providers)
    assert spec.warm_pool is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max": 2, "warm_pool": {"size": 3}}, "warm_pool.size (3) is above the tier's max (2)"),
        ({"max": 4, "warm_pool": {"size": 1, "max": 5}}, "warm_pool.max (5) is above the tier's max (4)"),
        ({"warm_pool": {"size": 3, "max": 2}}, "warm_pool: size (3) is above its max (2); set warm_pool.size"),
        ({"warm_pool": {"size": "auto"}}, "warm_pool.size: auto sizes the pool from the decision core's"),
        ({"warm_pool": {"size": "lots"}}, "warm_pool.size: expected a number of stopped instances (0-1000) or `auto`"),
        (
            {"policy": {"kind": "min-floor"}, "max": 4, "warm_pool": {"size": "auto", "max": 5}},
            "warm_pool.max (5) is above the tier's max (4)",
        ),
        ({"capacity": "spot", "warm_pool": {"size": 1}}, "warm_pool needs capacity: on-demand"),
        ({"warm_pool": {"size": 1, "reuse": True}}, "warm_pool.reuse: unknown field"),
    ],
)
def test_a_pool_that_cannot_work_is_refused_with_the_field_and_the_fix(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _parse(tier(**fields))  # type: ignore[arg-type]
    assert str(raised.value).startswith('tiers.yaml: tier "web": ')
    assert message in str(raised.value)


def test_an_auto_pool_on_the_decision_core_is_capped_by_the_tiers_max_unless_given_one() -> None:
    spec = _parse(tier(max=5, policy={"kind": "min-floor", "floor": 1}, warm_pool={"size": "auto"}))
    pool = spec.warm_pool  # type: ignore[attr-defined]
    assert (pool.auto, pool.most, pool.fixed_size, pool.fill) == (True, 5, None, True)
    spec = _parse(tier(max=5, policy={"kind": "min-floor"}, warm_pool={"size": "auto", "max": 2, "fill": False}))
    pool = spec.warm_pool  # type: ignore[attr-defined]
    assert (pool.most, pool.fill) == (2, False)
