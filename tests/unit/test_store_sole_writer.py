"""A store that is the only writer of its database (the simulator's) keeps the configuration and rollout
controls it read until it changes them itself; the daemon's store reads what other processes wrote."""

from __future__ import annotations

from pathlib import Path

from scalectl.controller.store import migrate
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.repository import Store
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

ONE = tiers_yaml({"web": tier(max=4, policy=min_floor(1))})
TWO = tiers_yaml({"web": tier(max=4, policy=min_floor(1)), "chat": tier(max=2, policy=min_floor(0))})


def _apply(store: Store, text: str) -> None:
    store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", 0.0)


def test_the_daemons_store_sees_other_writers_and_a_sole_writer_sees_its_own_changes(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 's.db'}")
    migrate.upgrade(engine)
    shared, sole, cli = Store(engine), Store(engine, sole_writer=True), Store(engine)
    _apply(sole, ONE)
    assert set(shared.config.active_tiers()) == set(sole.config.active_tiers()) == {"web"}
    assert shared.rollouts.controls() == sole.rollouts.controls() == {}

    _apply(cli, TWO)  # another process applies a file and restarts a rollout
    cli.rollouts.set("web", 1.0, restart=True)
    assert set(shared.config.active_tiers()) == {"web", "chat"}
    assert shared.rollouts.controls()["web"].generation == 1
    assert set(sole.config.active_tiers()) == {"web"}  # by contract nobody else writes: it keeps what it read
    assert sole.rollouts.controls() == {}

    sole.rollouts.set("web", 2.0, restart=True)  # its own writes are seen at once
    _apply(sole, TWO)
    assert sole.rollouts.controls()["web"].generation == 2
    assert set(sole.config.active_tiers()) == {"web", "chat"}
