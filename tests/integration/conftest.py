"""Integration fixtures: a fresh PostgreSQL database per test module, and a SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from scalectl.controller.store.db import make_engine
from tests.services import scratch_database


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    with scratch_database("sctest") as url:
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request: pytest.FixtureRequest) -> Engine:
    engine: Engine = request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "pg_engine")
    return engine
