"""A migrated SQLite store for the lease tests (on SQLite the lease clock is the injected one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from scalectl.controller.store import migrate
from scalectl.controller.store.db import make_engine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ha.db'}")
    migrate.upgrade(engine)
    yield engine
    engine.dispose()
