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


def _policy_rows(store: Store) -> list[tuple[str, int]]:
    with store.engine.connect() as conn:
        return [(t, d) for t, d in conn.exec_driver_sql("SELECT tier, desired FROM policy_state ORDER BY tier").all()]


def test_a_sole_writer_writes_committed_policy_states_when_read_and_drops_uncommitted_ones() -> None:
    from scalectl.policies.types import PolicyState

    engine = make_engine("sqlite://")
    migrate.upgrade(engine)
    sole = Store(engine, sole_writer=True)
    with sole.unit_of_work() as uow:
        uow.save_policy_state("web", PolicyState(last_change=1.0), 2, 1.0)
        uow.save_policy_state("web", PolicyState(last_change=2.0), 3, 2.0)  # the newest of a unit of work
        uow.commit()
    with sole.unit_of_work() as uow:
        uow.save_policy_state("chat", PolicyState(), 9, 3.0)  # never committed: as a rollback, dropped
    assert _policy_rows(sole) == []  # held, not written: nothing reads the table but the store itself
    state, desired = sole.policy.states()["web"]  # a read writes what is held first
    assert (state.last_change, desired) == (2.0, 3)
    assert _policy_rows(sole) == [("web", 3)]

    daemon = Store(engine)  # the daemon's store writes at commit
    with daemon.unit_of_work() as uow:
        uow.save_policy_state("chat", PolicyState(), 1, 4.0)
        uow.commit()
    assert _policy_rows(daemon) == [("chat", 1), ("web", 3)]
