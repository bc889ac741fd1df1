"""`scalectl db upgrade|current|downgrade`: schema migrations (Alembic)."""

from __future__ import annotations

from collections.abc import Callable

import typer
from sqlalchemy import Engine

from scalectl.cli.context import safe_url, settings
from scalectl.cli.output import fail
from scalectl.controller.store import migrate
from scalectl.controller.store.db import make_engine


def _migrate(action: Callable[[Engine, str], None], revision: str) -> None:
    url = settings().resolved_database_url()
    try:
        engine = make_engine(url)
        action(engine, revision)
        typer.echo(f"{safe_url(url)}: at revision {migrate.current_revision(engine) or 'base'}")
    except Exception as exc:
        fail(f"migration failed on {safe_url(url)}: {type(exc).__name__}: {str(exc).splitlines()[0]}")


def register(app: typer.Typer) -> None:
    db_app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)
    app.add_typer(db_app, name="db")

    @db_app.command()
    def upgrade(revision: str = typer.Argument("head")) -> None:
        """Migrate the schema up (default: to the newest revision)."""
        _migrate(migrate.upgrade, revision)

    @db_app.command()
    def downgrade(revision: str) -> None:
        """Migrate the schema down to REVISION ("base" removes every table)."""
        _migrate(migrate.downgrade, revision)

    @db_app.command()
    def current() -> None:
        """Print the schema revision and whether it is the newest."""
        url = settings().resolved_database_url()
        engine = make_engine(url)
        rev, head = migrate.current_revision(engine), migrate.head_revision(engine)
        typer.echo(f"{safe_url(url)}: {rev or 'base'} (newest: {head}){'' if rev == head else ' — run db upgrade'}")
