"""A stored configuration written under settings this release retired (`mode: thresholds`): the daemon refuses
to run it and says how to fix it, and a corrected file applies over it (diff and apply do not trip on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalectl.controller.startup import load_fleet
from scalectl.controller.store import migrate
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import ConfigVersion
from scalectl.controller.store.repository import Store, diff_config
from scalectl.tiers.config import parse_config
from scalectl.tiers.errors import ConfigError
from tests.builders import min_floor, tier, tiers_yaml

OLD = tiers_yaml({"web": tier(max=4, policy={"kind": "min-floor", "mode": "thresholds", "cooldown": "5m"})})
NEW = tiers_yaml({"web": tier(max=4, policy=min_floor(1)), "chat": tier(max=2, policy=min_floor(0))})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    engine = make_engine(f"sqlite:///{tmp_path / 's.db'}")
    migrate.upgrade(engine)
    store = Store(engine)
    with store.sessions.begin() as s:  # what an earlier release stored (this one refuses to parse it)
        s.add(ConfigVersion(applied_at=0.0, source="tiers.yaml", digest="old", text=OLD))
    return store


def test_the_daemon_refuses_a_stored_retired_setting_and_says_to_apply_a_file(store: Store) -> None:
    with pytest.raises(ConfigError) as refused:
        load_fleet(store, None, 1.0)
    text = str(refused.value)
    assert "stored config v1" in text and "`mode: thresholds` was retired" in text and "scalectl apply -f" in text


def test_a_corrected_file_diffs_and_applies_over_it(store: Store, tmp_path: Path) -> None:
    fleet = parse_config(NEW, "tiers.yaml")
    changes = {c.tier: c.change for c in diff_config(store.config.diff_base(), fleet)}
    assert changes == {"web": "changed", "chat": "added"}
    version, _ = store.config.apply(fleet, NEW, "tiers.yaml", 1.0)
    assert version == 2 and set(store.config.active_tiers()) == {"web", "chat"}
    path = tmp_path / "tiers.yaml"  # and `scalectl daemon -f FILE` over it starts
    path.write_text(NEW)
    fleet_now, _ = load_fleet(store, path, 2.0)
    assert set(fleet_now.tiers) == {"web", "chat"}
