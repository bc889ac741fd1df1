"""Instances in the store: the row ↔ entity mapper and the repository a unit of work hands out.

The entity (``domain.instance.Instance``) is what the reconciler changes; the row is how it is stored.
Loaded entities are tracked with their rows; ``flush`` writes every tracked entity back."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from controller.store.models import InstanceRecord
from domain.instance import LIVE, Instance, InstanceState

LIVE_STATES = tuple(sorted(s.value for s in LIVE))  # for queries by state (the simulator uses it too)
_FIELDS = tuple(f.name for f in dataclasses.fields(Instance))


@functools.cache
def live_instances_query() -> Select[Any]:
    # Built once: the daemon asks every tick, and building the IN clause costs more than running it.
    return select(InstanceRecord).where(InstanceRecord.state.in_(LIVE_STATES))


def to_entity(row: InstanceRecord) -> Instance:
    values = {name: getattr(row, name) for name in _FIELDS}
    values["state"] = InstanceState(row.state)
    values["end_state"] = InstanceState(row.end_state or InstanceState.TERMINATED)
    return Instance(**values)


def to_row(inst: Instance, row: InstanceRecord | None = None) -> InstanceRecord:
    """Write the entity onto its row (a new row when there is none); only changed columns are set."""
    row = row if row is not None else InstanceRecord(key=inst.key)
    for name in _FIELDS:
        value = getattr(inst, name)
        if isinstance(value, InstanceState):
            value = value.value
        if getattr(row, name, None) != value:
            setattr(row, name, value)
    return row


class InstanceRepository:
    """Instances within one unit of work: each key maps to one entity for the whole unit."""

    def __init__(self, session: Session):
        self._session = session
        self._tracked: dict[str, tuple[Instance, InstanceRecord | None]] = {}

    def live(self) -> list[Instance]:
        """Every instance that may bill, as stored after the changes made so far."""
        self.flush()
        found = []
        for row in self._session.scalars(live_instances_query()).all():
            tracked = self._tracked.get(row.key)
            if tracked is None:
                tracked = self._tracked[row.key] = (to_entity(row), row)
            found.append(tracked[0])
        return found

    def add(self, inst: Instance) -> None:
        self._tracked[inst.key] = (inst, None)

    def known_keys(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` any stored row (live or ended) has."""
        self.flush()
        wanted = list(keys)
        found: set[str] = set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            found.update(self._session.scalars(select(InstanceRecord.key).where(InstanceRecord.key.in_(chunk))).all())
        return found

    def flush(self) -> None:
        for key, (inst, row) in self._tracked.items():
            if row is None:
                row = to_row(inst)
                self._session.add(row)
                self._tracked[key] = (inst, row)
            else:
                to_row(inst, row)
        self._session.flush()
