"""Alembic environment: the URL and connection come from controller.store.migrate, never from a file."""

from __future__ import annotations

from alembic import context

from scalectl.controller.store.models import Base

config = context.config
target_metadata = Base.metadata


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
