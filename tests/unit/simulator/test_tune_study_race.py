"""Workers started together on an empty PostgreSQL race to create Optuna's tables: the loser's error is a race
to retry, whichever of PostgreSQL's "already exists" errors it got (the first CI run met DuplicateTable)."""

from __future__ import annotations

from pathlib import Path

import psycopg.errors
import pytest
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


def test_a_joining_worker_never_finds_the_tier_without_its_slo(tmp_path: Path) -> None:
    """The second race, of the study's own attributes: a worker that joins between the creator's two writes
    must find both or neither. "tier" (what a joiner checks) is written last, so the writes are recorded in
    that order; a joiner at any point either writes the same pair itself or finds the whole of it."""
    import optuna

    from scalectl.simulator.tune_study import shared_study

    url = f"sqlite:///{tmp_path / 'study.db'}"
    writes: list[str] = []
    real = optuna.study.Study.set_user_attr

    def recorded(self: optuna.study.Study, key: str, value: object) -> None:
        writes.append(key)
        real(self, key, value)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna.study.Study, "set_user_attr", recorded)
        shared_study(url, "web", "web", 0.6, seed=1)
    assert writes == ["slo_target", "tier"]
    joined = shared_study(url, "web", "web", 0.6, seed=2)  # the same pair: joins
    assert joined.user_attrs == {"tier": "web", "slo_target": 0.6}
