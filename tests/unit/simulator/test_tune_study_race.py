"""Workers started together on an empty PostgreSQL race to create Optuna's tables: the loser's error is a race
to retry, whichever of PostgreSQL's "already exists" errors it got (the first CI run met DuplicateTable)."""

from __future__ import annotations

import psycopg.errors
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from scalectl.simulator.tune_study import _a_race


def test_duplicate_tables_types_and_keys_are_races_and_other_errors_are_not() -> None:
    duplicate_table = ProgrammingError("CREATE TABLE studies", {}, psycopg.errors.DuplicateTable("exists"))
    duplicate_type = ProgrammingError("CREATE TYPE", {}, psycopg.errors.DuplicateObject("exists"))
    duplicate_key = IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation("exists"))
    assert _a_race(duplicate_table) and _a_race(duplicate_type) and _a_race(duplicate_key)
    assert not _a_race(ProgrammingError("SELECT", {}, psycopg.errors.UndefinedTable("missing")))
    assert not _a_race(OperationalError("connect", {}, psycopg.errors.ConnectionTimeout("down")))
    assert not _a_race(ValueError("bad url"))
