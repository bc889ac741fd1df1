"""The spot lifecycle fields of a tier: defaults, and clear errors for combinations that mean nothing."""

from __future__ import annotations

import pytest

from scalectl.tiers.config import ConfigError
from tests.builders import fleet, tier


def test_defaults_keep_todays_behaviour() -> None:
    spec = fleet({"t": tier(capacity="spot", fallback="on-demand")}).tiers["t"]
    assert (spec.max_surge, spec.on_demand_base, spec.fallback_after) == (1, 0, 0.0)


def test_fields_parse_durations() -> None:
    spec = fleet(
        {"t": tier(capacity="spot", fallback="on-demand", on_demand_base=2, fallback_after="2m", max_surge=0)}
    ).tiers["t"]
    assert (spec.max_surge, spec.on_demand_base, spec.fallback_after) == (0, 2, 120.0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"on_demand_base": 1}, "on_demand_base only applies to capacity: spot"),
        ({"capacity": "spot", "on_demand_base": 9, "max": 4}, "on_demand_base (9) is above max (4)"),
        ({"capacity": "spot", "fallback_after": "2m"}, "fallback_after needs fallback: on-demand"),
        ({"capacity": "spot", "max_surge": -1}, "max_surge"),
    ],
)
def test_meaningless_combinations_are_refused_with_the_field_named(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        fleet({"t": tier(**fields)})  # type: ignore[arg-type]
    assert message in str(raised.value)
