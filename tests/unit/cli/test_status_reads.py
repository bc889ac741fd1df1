"""`scalectl status` on an up-to-date SQLite file reads through sqlite3, not SQLAlchemy: the document must be
the one the store (the daemon's GET /v1/status) builds, field for field, and anything unusual goes the ORM way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from scalectl.controller.ha.lease import Identity
from scalectl.controller.ha.lease_store import LeaseStore
from scalectl.controller.ha.replica import read_replicas
from scalectl.controller.settings import Settings
from scalectl.controller.store import world_clock
from scalectl.controller.store.models import InstanceRecord
from scalectl.controller.store.open import open_store
from scalectl.controller.store.repository import Store
from scalectl.controller.views.status import status_document
from scalectl.controller.views.status_reads import open_sqlite_reads, sqlite_file
from scalectl.domain.instance import InstanceState
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import parse_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"
WALL = 1_800_000_000.0


def _instance(key: str, tier: str, state: InstanceState, price: float, **kw: object) -> InstanceRecord:
    fields: dict[str, object] = {
        "provider": "simulated",
        "provider_id": f"p-{key}",
        "offer_id": "o",
        "gpu": "H100-SXM5-80GB",
        "region": "r",
        "capacity": "on-demand",
        "created_at": WALL - 3000,
        "updated_at": WALL - 3000,
        "launched_at": WALL - 2900,
    }
    return InstanceRecord(key=key, tier=tier, state=state.value, price_per_hour=price, **{**fields, **kw})


def _busy_store(url: str) -> Store:
    """Every kind of row status reads: tiers, policy state, live and ended instances, request counts, a
    leader with two replicas, and a demo's accelerated world clock."""
    store = open_store(Settings(database_url=url))
    text = EXAMPLE.read_text()
    store.config.apply(parse_config(text, "tiers.yaml"), text, "tiers.yaml", WALL - 4000)
    with store.unit_of_work() as uow:
        uow.save_policy_state("research", PolicyState(last_desired=2), 2, WALL - 100)
        for minute in range(int(WALL // 60) - 50, int(WALL // 60)):
            uow.add_requests("research", minute, 120.0)
        uow.commit()
    with store.sessions.begin() as s:
        s.add_all(
            [
                _instance("r1", "research", InstanceState.READY, 1.234567),
                _instance("r2", "research", InstanceState.PENDING, 2.5, launched_at=None, provider_id=None),
                _instance("r3", "research", InstanceState.DRAINING, 0.333333),
                _instance("r4", "research", InstanceState.TERMINATED, 9.0, ended_at=WALL - 1200),
                _instance("x1", "retired-tier", InstanceState.READY, 4.0),
            ]
        )
    leases = LeaseStore(store.engine, 10.0, lambda: WALL - 5)
    for n, me in enumerate([Identity("a", "host-a", 11), Identity("b", "host-b", 12)]):
        if n == 0:
            assert leases.try_acquire(me, 0.0) is not None
        leases.heartbeat(me, WALL - 60 + n, "http://127.0.0.1:8089")
    world_clock.publish(store, speed=60.0, world=WALL, wall=WALL - 30, running=True)
    return store


def test_sqlite_reads_build_the_stores_document(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = _busy_store(url)
    expected = status_document(
        store.reads, read_replicas(store.engine), WALL, 30.0, world_now=world_clock.world_now(store, WALL)
    )
    reads = open_sqlite_reads(url)
    assert reads is not None
    try:
        printed = status_document(reads, reads.replicas(), WALL, 30.0, world_now=reads.world_now(WALL))
    finally:
        reads.close()
    assert printed == expected
    rows = {r["tier"]: r for r in printed["tiers"]}  # the document is not trivially empty
    assert rows["research"]["desired"] == 2 and rows["research"]["ready"] == 1
    assert rows["research"]["cost_per_1k_requests"] is not None and "retired-tier" in rows
    assert printed["leader"]["host"] == "host-a" and len(printed["replicas"]) == 2


def test_a_database_not_at_the_head_goes_the_orm_way(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    assert open_sqlite_reads(f"sqlite:///{path}") is None  # new: no alembic_version table
    open_store(Settings(database_url=f"sqlite:///{path}")).engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'older'")
    assert open_sqlite_reads(f"sqlite:///{path}") is None


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite+pysqlite:///x.db",
        "sqlite:///x.db?mode=ro",
        "sqlite:///my%20fleet.db",
        "postgresql://u@h/db",
    ],
)
def test_only_plain_sqlite_files_are_read_directly(url: str) -> None:
    assert sqlite_file(url) is None


def test_a_plain_sqlite_url_names_its_file() -> None:
    assert sqlite_file("sqlite:////var/lib/scalectl/x.db") == "/var/lib/scalectl/x.db"
    assert sqlite_file("sqlite:///x.db") == "x.db"
