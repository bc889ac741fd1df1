"""What every command needs: settings, the store (migrated), and errors turned into clean exits."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from scalectl.cli.output import EXIT_ERROR, EXIT_USAGE, fail
from scalectl.tiers.errors import ConfigError

if TYPE_CHECKING:  # SQLAlchemy loads with the store: `status` on SQLite reads without it (status_reads)
    from scalectl.controller.settings import Settings
    from scalectl.controller.store.repository import Store


def settings() -> Settings:
    # pydantic loads when a command runs, not when the shell completes a command's options
    from pydantic import ValidationError

    from scalectl.controller.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:  # name the variable, one line per problem
        problems = [
            f"{_env_name(err['loc'])}={err.get('input')!r}: {err['msg']}; fix or unset the variable"
            for err in exc.errors()
        ]
        fail("bad environment setting: " + "\n".join(problems), EXIT_USAGE)


def _env_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    return "SCALECTL_DATABASE_URL" if field == "database_url" else f"SCALECTL_{field.upper()}"


def safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable database URL>"


def open_store(s: Settings) -> Store:
    from sqlalchemy.exc import OperationalError, SQLAlchemyError

    from scalectl.controller.store.open import open_store as _open

    url = s.resolved_database_url()
    try:
        return _open(s)
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        fail(f"cannot open the database {safe_url(url)}: {reason}. Check SCALECTL_DATABASE_URL / DATABASE_URL.")
    except SQLAlchemyError as exc:
        fail(f"database error on {safe_url(url)}: {type(exc).__name__}: {str(exc).splitlines()[0]}")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Configuration problems exit 2 with every problem listed; nothing was changed."""
    try:
        yield
    except ConfigError as exc:
        fail(f"{exc}\nNothing was changed.", EXIT_USAGE)
    except sqlite3.OperationalError as exc:  # `status` reading SQLite directly: what SQLAlchemy would wrap
        fail(f"database unavailable: {str(exc).splitlines()[0]}", EXIT_ERROR)
    except Exception as exc:
        if not _sqlalchemy_error(exc, "OperationalError"):
            raise
        fail(f"database unavailable: {str(exc.orig or exc).splitlines()[0]}", EXIT_ERROR)  # type: ignore[attr-defined]


def _sqlalchemy_error(exc: Exception, name: str) -> bool:
    """Whether ``exc`` is SQLAlchemy's ``name`` error, without importing SQLAlchemy: a command that never
    loaded it cannot have raised one."""
    module = sys.modules.get("sqlalchemy.exc")
    return module is not None and isinstance(exc, getattr(module, name))
