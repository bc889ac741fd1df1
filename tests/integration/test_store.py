"""Migrations up and down, and the store's operations, on SQLite and the real PostgreSQL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, inspect, text

from scalectl.controller.store import migrate
from scalectl.controller.store.models import Base, InstanceRecord
from scalectl.controller.store.policy_store import PolicyStateStore
from scalectl.controller.store.repository import Store
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, ready_instance_row, tier, tiers_yaml

TIERS = tiers_yaml({"web": tier(min=1, max=4, policy=min_floor(1))})


def test_migrations_go_up_and_down_and_match_the_models(any_engine: Engine) -> None:
    migrate.upgrade(any_engine)
    assert migrate.is_up_to_date(any_engine)
    tables = set(inspect(any_engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    for table in Base.metadata.tables.values():  # every model column exists in the migrated schema
        columns = {c["name"] for c in inspect(any_engine).get_columns(table.name)}
        assert {c.name for c in table.columns} <= columns, table.name
    migrate.downgrade(any_engine, "base")
    assert migrate.current_revision(any_engine) is None
    assert not set(Base.metadata.tables) & set(inspect(any_engine).get_table_names())
    migrate.upgrade(any_engine)  # and up again on the emptied database
    assert migrate.is_up_to_date(any_engine)


def test_apply_versions_only_real_changes(any_engine: Engine) -> None:
    migrate.upgrade(any_engine)
    store = Store(any_engine)
    fleet = parse_config(TIERS, "t.yaml")
    v1, changes = store.config.apply(fleet, TIERS, "t.yaml", 100.0)
    assert v1 == 1 and [c.change for c in changes] == ["added"]
    again, _ = store.config.apply(fleet, TIERS, "t.yaml", 101.0)
    assert again is None  # the very same file: no new version
    changed_text = TIERS.replace("max: 4", "max: 8")
    v2, changes = store.config.apply(parse_config(changed_text, "t.yaml"), changed_text, "t.yaml", 102.0)
    assert v2 == 2 and [c.change for c in changes] == ["changed"]
    assert store.config.active_tiers()["web"].max == 8
    assert store.config.fleet_config() is not None and store.config.fleet_config().tiers["web"].max == 8  # type: ignore[union-attr]
    assert store.config.tier_specs()["web"]["max"] == 8  # the specs are read from the one stored form


def test_downgrading_past_the_single_stored_config_rebuilds_the_tier_copies(any_engine: Engine) -> None:
    migrate.upgrade(any_engine)
    Store(any_engine).config.apply(parse_config(TIERS, "t.yaml"), TIERS, "t.yaml", 100.0)
    migrate.downgrade(any_engine, "0002")
    with any_engine.connect() as conn:
        rows = conn.execute(text("SELECT name, spec, config_version, active FROM tiers")).all()
    assert [(r.name, r.config_version, bool(r.active)) for r in rows] == [("web", 1, True)]
    spec = rows[0].spec if isinstance(rows[0].spec, dict) else json.loads(rows[0].spec)
    assert spec == yaml.safe_load(TIERS)["tiers"]["web"]  # the tier as written, read by the frozen revision
    migrate.upgrade(any_engine)
    assert "tiers" not in inspect(any_engine).get_table_names()


def test_instances_decisions_events_and_policy_state_round_trip(any_engine: Engine) -> None:
    migrate.upgrade(any_engine)
    store = Store(any_engine)
    store.config.apply(parse_config(TIERS, "t.yaml"), TIERS, "t.yaml", 1.0)
    with store.sessions.begin() as s:
        s.add(
            InstanceRecord(
                key="sc-web-00000001",
                tier="web",
                state="ready",
                provider="simulated",
                provider_id="sim-1",
                offer_id="o",
                gpu="H100-SXM5-80GB",
                gpu_count=1,
                region="r",
                capacity="on-demand",
                price_per_hour=2.4,
                created_at=1.0,
                updated_at=1.0,
            )
        )
        PolicyStateStore.save(s, "web", PolicyState(since={"queue_over": 5.0}, last_change=3.0), 2, 6.0)
    assert [r.key for r in store.reads.instances("web")] == ["sc-web-00000001"]
    assert store.failures.mark_notice("simulated", "sim-1", None, 7.0) == "sc-web-00000001"
    assert store.reads.instances("web")[0].notice_at == 7.0
    state, desired = store.policy.states()["web"]
    assert desired == 2 and state.since == {"queue_over": 5.0} and state.last_change == 3.0
    assert any(e.kind == "interruption-notice" for e in store.records.events("web"))
    # The usual path: the row exists and one prepared UPDATE replaces it; request counts add up.
    with store.unit_of_work() as uow:
        uow.save_policy_state("web", PolicyState(learned={"cap.prior": 40.0}, last_desired=3), 3, 8.0)
        uow.add_requests("web", 100, 250.0)
        uow.add_requests("web", 100, 50.0)  # a restarted daemon's rest of the minute
        uow.commit()
    state, desired = store.policy.states()["web"]
    assert desired == 3 and state.learned == {"cap.prior": 40.0} and state.since == {}
    assert store.records.requests_by_minute(6000.0, 6060.0) == {"web": {100: 300.0}}


@pytest.mark.parametrize("days", [1, 30])
def test_prune_keeps_recent_history(any_engine: Engine, days: int) -> None:
    from scalectl.controller.store.models import DecisionRecord

    migrate.upgrade(any_engine)
    store = Store(any_engine)
    with store.sessions.begin() as s:
        for t in (0.0, 86400.0 * days):
            s.add(DecisionRecord(tier="web", t=t, current=1, desired=1, reason="x", signals={}))
    assert store.records.prune(before=86400.0 * days - 1) == 1
    assert [d.t for d in store.records.decisions("web")] == [86400.0 * days]


def test_a_notice_from_another_provider_account_or_for_another_instance_changes_nothing(any_engine: Engine) -> None:
    from scalectl.controller.store.repository import NoticeMismatch

    migrate.upgrade(any_engine)
    store = Store(any_engine)
    store.config.apply(parse_config(TIERS, "t.yaml"), TIERS, "t.yaml", 1.0)
    with store.sessions.begin() as s:
        s.add(ready_instance_row("sc-web-00000002", "spheron-a", "dep-7"))
    for provider, provider_id in (("spheron-b", None), ("spheron-b", "dep-7"), ("spheron-a", "dep-8")):
        with pytest.raises(NoticeMismatch):
            store.failures.mark_notice(provider, provider_id, "sc-web-00000002", 5.0)
    assert store.reads.instances("web")[0].notice_at is None
    assert not any(e.kind == "interruption-notice" for e in store.records.events("web"))
    assert store.failures.mark_notice("spheron-a", "dep-7", "sc-web-00000002", 6.0) == "sc-web-00000002"
    assert store.reads.instances("web")[0].notice_at == 6.0


def test_seen_webhook_requests_are_shared_claimed_once_and_pruned_by_age(any_engine: Engine) -> None:
    from sqlalchemy import func, select

    from scalectl.controller.store.models import WebhookSeen
    from scalectl.controller.store.seen_requests import SeenRequests

    migrate.upgrade(any_engine)
    one, two = (SeenRequests(Store(any_engine).sessions, keep_for=600.0) for _ in range(2))  # two daemons
    assert one.claim("a" * 64, 1000.0) is True
    assert two.claim("a" * 64, 1001.0) is False  # the other daemon sees the first one's claim
    one.release("a" * 64)
    assert two.claim("a" * 64, 1002.0) is True
    for i in range(50):
        assert one.claim(f"{i:064d}", 1100.0 + i) is True
    assert two.claim("b" * 64, 1100.0 + 600.0 + 25.5) is True  # prunes everything older than 10 minutes
    with Store(any_engine).sessions() as s:
        assert s.scalar(select(func.count()).select_from(WebhookSeen)) == 24 + 1
    assert one.claim("a" * 64, 1100.0 + 700.0) is True  # long gone from the table: its timestamp guards it now


def test_a_daemon_killed_while_it_creates_the_sqlite_schema_starts_next_time(tmp_path: Path) -> None:
    """SIGKILL in the middle of the first migration (the kill storm hit it): the next start must find either
    no schema or the whole one, never half of it ("table config_versions already exists" for ever after).
    pysqlite runs CREATE TABLE outside any transaction unless one is begun explicitly."""
    import multiprocessing

    from sqlalchemy import event

    from scalectl.controller.store.db import make_engine

    url = f"sqlite:///{tmp_path / 'store.db'}"

    def killed_after_three_tables() -> None:
        engine = make_engine(url)
        created = 0

        @event.listens_for(engine, "after_cursor_execute")
        def _count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
            nonlocal created
            if statement.lstrip().upper().startswith("CREATE TABLE"):
                created += 1
                if created == 3:
                    os._exit(9)  # no cleanup, no rollback: what SIGKILL leaves

        migrate.upgrade(engine)

    child = multiprocessing.get_context("fork").Process(target=killed_after_three_tables)
    child.start()
    child.join(60)
    assert child.exitcode == 9
    engine = make_engine(url)
    migrate.upgrade(engine)
    assert migrate.is_up_to_date(engine)
    engine.dispose()
