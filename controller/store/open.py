"""Open the store for a command: migrate only when the database is behind. Alembic takes longer to import
than most commands take to run, so an up-to-date database (the usual case) is recognised without it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

import migrations
from controller.settings import Settings
from controller.store.db import make_engine
from controller.store.repository import Store

_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.MULTILINE)


def script_heads(versions: Path | None = None) -> set[str]:
    """The head revisions of the migration scripts, read from their source without importing Alembic."""
    folder = versions or Path(migrations.__file__).parent / "versions"
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in folder.glob("*.py"):
        found = {m.group(1): m.group(2) for m in _ASSIGNMENT.finditer(script.read_text(encoding="utf-8"))}
        if "revision" not in found:
            continue
        revisions.add(ast.literal_eval(found["revision"]))
        down = ast.literal_eval(found.get("down_revision", "None"))
        parents.update([down] if isinstance(down, str) else list(down or ()))
    return revisions - parents


def database_revisions(engine: Engine) -> set[str]:
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))}
    except (OperationalError, ProgrammingError):  # no alembic_version table yet: a new database
        return set()


def open_store(settings: Settings, *, migrate: bool = True) -> Store:
    engine = make_engine(settings.resolved_database_url())
    if migrate and database_revisions(engine) != script_heads():
        from controller.store.migrate import upgrade

        upgrade(engine)
    return Store(engine)
