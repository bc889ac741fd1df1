"""Run Alembic programmatically (no alembic.ini needed): upgrade, downgrade, current revision."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

from scalectl import migrations


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


@contextlib.contextmanager
def _all_or_nothing(engine: Engine) -> Iterator[Connection]:
    """A connection whose migration commits whole or not at all. PostgreSQL's DDL is transactional as is;
    pysqlite begins a transaction only before data statements, so each CREATE TABLE committed on its own,
    and a daemon killed in its first migration left half a schema that every later start refused
    ("table ... already exists"). On SQLite the driver's implicit transactions are turned off for this
    connection and one explicit BEGIN IMMEDIATE covers the whole migration."""
    if engine.dialect.name != "sqlite":
        with engine.begin() as conn:
            yield conn
        return
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        saved = driver.isolation_level
        driver.isolation_level = None  # no implicit BEGIN/COMMIT: the one below is explicit
        try:
            with conn.begin():  # its commit or rollback ends the explicit transaction below
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                yield conn
        finally:
            driver.isolation_level = saved


def upgrade(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config(engine)
    with _all_or_nothing(engine) as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str) -> None:
    cfg = alembic_config(engine)
    with _all_or_nothing(engine) as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision(engine)
