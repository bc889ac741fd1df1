"""The live instance rows as last read, kept between ticks on a database only this process writes.

Only the simulator's private database qualifies (``Store(sole_writer=True)``): there every statement that
could change the rows runs through this engine, so the rows read at one tick stand until one does. Reading
them again each tick cost a tenth of a simulated day. The daemon's database has other writers (a second
daemon, `scalectl`) and always reads."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine, event


def write_pattern(table: str) -> re.Pattern[str]:
    """Matches an INSERT, UPDATE or DELETE statement on ``table`` (as SQLAlchemy renders them)."""
    return re.compile(rf"^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\W?{re.escape(table)}\b", re.I)


class LiveRowsCache:
    """Forgets the rows on any write to the instances table, and on a rollback that undoes one (a row read
    after an uncommitted write holds it)."""

    def __init__(self, engine: Engine, table: str = "instances") -> None:
        self.rows: list[Any] | None = None
        self._pattern = write_pattern(table)
        self._unsettled = False  # a write to the table not yet committed
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._rollback)

    def _statement(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if self._pattern.match(statement):
            self.rows = None
            self._unsettled = True

    def _commit(self, _conn: object) -> None:
        self._unsettled = False

    def _rollback(self, _conn: object) -> None:
        if self._unsettled:
            self.rows = None
            self._unsettled = False
