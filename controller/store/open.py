"""Open the store for a command: migrate only when the database is behind. Alembic takes longer to import
than most commands take to run, so an up-to-date database (the usual case) is recognised without it."""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from scalectl.controller.settings import Settings
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.repository import Store
from scalectl.controller.store.revisions import script_heads

__all__ = ["database_revisions", "open_store", "script_heads"]


def database_revisions(engine: Engine) -> set[str]:
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))}
    except (OperationalError, ProgrammingError):  # no alembic_version table yet: a new database
        return set()


def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    engine = make_engine(settings.resolved_database_url())
    if migrate and database_revisions(engine) != script_heads():
        from scalectl.controller.store.migrate import upgrade

        upgrade(engine)
    return Store(engine)
