"""Disruption windows: when they are open (boundaries, weekdays, time zones), which budget wins, and the
errors a tiers file gets for a bad one."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from scalectl.tiers.config import parse_config
from scalectl.tiers.disruption import DisruptionWindow, active_budget, budget_count
from scalectl.tiers.errors import ConfigError
from tests.builders import min_floor, tier, tiers_yaml

NY = ZoneInfo("America/New_York")
BUSINESS = DisruptionWindow(cron="0 9 * * mon-fri", duration=8 * 3600, timezone="America/New_York", max_disrupted=0)


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=NY).timestamp()


@pytest.mark.parametrize(
    ("when", "is_open"),
    [
        ("2026-03-06 08:59:59", False),  # a Friday, just before
        ("2026-03-06 09:00:00", True),  # the firing itself opens it
        ("2026-03-06 16:59:59", True),
        ("2026-03-06 17:00:00", False),  # eight hours later it is closed
        ("2026-03-07 10:00:00", False),  # Saturday
        ("2026-03-09 09:30:00", True),  # Monday after the DST change: still 09:00 local
    ],
)
def test_a_window_is_open_from_its_firing_for_its_duration(when: str, is_open: bool) -> None:
    assert (BUSINESS.open_at(at(when)) is not None) is is_open


def test_the_most_restrictive_open_budget_wins_and_says_which() -> None:
    night = DisruptionWindow(cron="0 0 * * *", duration=24 * 3600, max_disrupted="50%")
    noon = at("2026-03-06 12:00:00")
    assert active_budget(2, [], 10, noon) == (2, None)
    assert active_budget(None, [], 10, noon) == (None, None)
    allowed, why = active_budget(2, [night, BUSINESS], 10, noon)
    assert allowed == 0 and why is not None and '"0 9 * * mon-fri" (America/New_York) for 8h' in why
    assert active_budget(2, [night], 10, noon)[0] == 2  # 50% of 10 is 5: the tier's own 2 is stricter
    assert active_budget(8, [night], 10, noon)[0] == 5


def test_budgets_count_shares_of_the_fleet() -> None:
    assert budget_count(0, 10) == 0 and budget_count(3, 10) == 3
    assert budget_count(0.25, 10) == 2 and budget_count(0.25, 2) == 1  # a non-zero share never blocks
    assert budget_count(0.0, 10) == 0


def test_the_tiers_file_takes_windows_and_names_a_bad_one() -> None:
    good = {"cron": "0 9 * * mon-fri", "duration": "8h", "timezone": "Europe/Berlin", "max_disrupted": "0%"}
    fleet = parse_config(tiers_yaml({"web": tier(policy=min_floor(1), disruption_windows=[good])}), "t.yaml")
    (window,) = fleet.tiers["web"].disruption_windows
    assert window.max_disrupted == 0.0 and window.duration == 8 * 3600
    for bad, field, fix in [
        ({**good, "cron": "at nine"}, "disruption_windows[0].cron", "5-field cron"),
        ({**good, "timezone": "Mars/Base"}, "disruption_windows[0].timezone", "IANA timezone"),
        ({**good, "max_disrupted": -1}, "disruption_windows[0].max_disrupted", "at least 0"),
        ({**good, "duration": "0s"}, "disruption_windows[0].duration", "greater than 0"),
    ]:
        with pytest.raises(ConfigError) as err:
            parse_config(tiers_yaml({"web": tier(policy=min_floor(1), disruption_windows=[bad])}), "t.yaml")
        assert field in str(err.value) and fix in str(err.value), str(err.value)
    with pytest.raises(ConfigError) as err:  # the tier's own budget still needs at least one
        parse_config(tiers_yaml({"web": tier(policy=min_floor(1), max_disrupted=0)}), "t.yaml")
    assert "max_disrupted" in str(err.value) and "at least 1" in str(err.value)
