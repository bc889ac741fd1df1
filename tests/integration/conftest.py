"""Integration fixtures: a fresh PostgreSQL database per test module, and a SQLite file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from controller.store.db import make_engine
from tests.services import PG_URL, ensure_service


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    ensure_service("postgresql")
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"sctest_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine = make_engine(make_url(PG_URL).set(database=name).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request: pytest.FixtureRequest) -> Engine:
    engine: Engine = request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "pg_engine")
    return engine
