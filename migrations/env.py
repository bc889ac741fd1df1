"""Alembic environment: the URL and connection come from scalectl.controller.store.migrate, never from a file.

Migrations are frozen history and import nothing of scalectl's (an import-linter contract holds it): a revision
that imported today's models or parser would change meaning as the code moves on. Revisions are written by
hand; tests/integration/test_store.py checks that the migrated schema has every column the models declare."""

from __future__ import annotations

from alembic import context

config = context.config
target_metadata = None  # no autogenerate: see above


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite needs batch mode for ALTER
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
