"""Instances in the store: the row ↔ entity mapper and the repository a unit of work hands out.

The entity (``scalectl.domain.instance.Instance``) is what the reconciler changes; the row is how it is stored.
Loaded entities are tracked with their rows; ``flush`` writes every tracked entity back."""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import Select, case, func, insert, select, update
from sqlalchemy.orm import Session

from scalectl.controller.store.live_rows import LiveRowsCache
from scalectl.controller.store.models import InstanceRecord
from scalectl.domain.instance import LIVE, Instance, InstanceState, is_counted

LIVE_STATES = tuple(sorted(s.value for s in LIVE))  # for queries by state (the simulator uses it too)
_FIELDS = tuple(f.name for f in dataclasses.fields(Instance))
_values = operator.attrgetter(*_FIELDS)  # an entity's (or a row's) facts as one tuple, in _FIELDS order


@dataclasses.dataclass(frozen=True)
class FleetShare:
    """One tier's part of the fleet, as the fleet budget sees it."""

    spend: float  # $/hour its live instances bill
    counted: int  # instances that count toward its size


@functools.cache
def live_instances_query() -> Select[Any]:
    # Built once: the daemon asks every tick, and building the IN clause costs more than running it.
    # Plain columns, not ORM rows: the tick maps them onto entities and writes back only what changed. Run
    # on the session's connection (Core), not the session: the ORM's result layer adds work per row.
    columns = InstanceRecord.__table__.c
    return select(*(columns[name] for name in _FIELDS)).where(columns["state"].in_(LIVE_STATES))


def live_groups_query(*, tiers: Collection[str] | None = None, excluding: Collection[str] = ()) -> Select[Any]:
    """Live instances grouped by (tier, state, surge): count, $/hour billed (a stopped one's: its disk), oldest
    ``created_at`` — what the fleet budget needs of other daemons' tiers and the metrics of every tier,
    without loading rows."""
    i = InstanceRecord
    columns: tuple[Any, ...] = (
        i.tier,
        i.state,
        i.surge,
        func.count(),
        func.sum(case((i.state == InstanceState.STOPPED.value, i.storage_per_hour), else_=i.price_per_hour)),
        func.min(i.created_at),
    )
    query = select(*columns).where(i.state.in_(LIVE_STATES)).group_by(i.tier, i.state, i.surge)
    if tiers is not None:
        query = query.where(i.tier.in_(sorted(tiers)))
    if excluding:
        query = query.where(i.tier.not_in(sorted(excluding)))
    return query


_KEY_AT, _TIER_AT, _STATE_AT, _END_STATE_AT, _PROVIDER_ID_AT = (
    _FIELDS.index(n) for n in ("key", "tier", "state", "end_state", "provider_id")
)
_STATES = {s.value: s for s in InstanceState}


def to_entity(row: Any) -> Instance:
    """An entity from a row (an ``InstanceRecord`` or a result row with the same names)."""
    return from_facts(_values(row))


def from_facts(facts: Iterable[Any]) -> Instance:
    """An entity from its facts in ``_FIELDS`` order (a row of ``live_instances_query``). Positional: the
    tick maps every live row each time, and by name it cost twice as much."""
    values = list(facts)
    values[_STATE_AT] = _STATES[values[_STATE_AT]]
    values[_END_STATE_AT] = _STATES[values[_END_STATE_AT] or InstanceState.TERMINATED.value]
    return Instance(*values)


def to_row(inst: Instance) -> InstanceRecord:
    return InstanceRecord(**_stored(dict(zip(_FIELDS, _values(inst), strict=True))))


def _stored(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.value if isinstance(v, InstanceState) else v for k, v in values.items()}


class InstanceRepository:
    """Instances within one unit of work: each key maps to one entity for the whole unit. Each entity
    is kept with the facts last stored for it; ``flush`` inserts new ones and updates changed columns."""

    def __init__(self, session: Session, live_rows: LiveRowsCache | None = None):
        self._session = session
        self._live_rows = live_rows
        # key -> entity, and key -> the facts last stored for it (None: not stored yet). Two dicts, not one of
        # pairs: a pair per instance was 10,000 more objects a tick for the garbage collector to follow.
        self._entities: dict[str, Instance] = {}
        self._stored: dict[str, tuple[Any, ...] | None] = {}
        self.wrote = False  # a flush sent rows since the unit of work last committed

    def live(self, tiers: Collection[str] | None = None) -> list[Instance]:
        """Every instance that may bill (of ``tiers`` only, when given), as stored after the changes made
        so far."""
        self.flush()
        found = []
        entities, stored = self._entities, self._stored
        for row in self._live_row_facts(tiers):
            key = row[_KEY_AT]
            inst = entities.get(key)
            if inst is None:
                inst = entities[key] = from_facts(row)
                stored[key] = _values(inst)
            found.append(inst)
        return found

    def _live_row_facts(self, tiers: Collection[str] | None) -> list[Any]:
        cache = self._live_rows
        if cache is None:
            query = live_instances_query()
            if tiers is not None:
                query = query.where(InstanceRecord.tier.in_(sorted(tiers)))
            return list(self._session.connection().execute(query).all())
        if cache.rows is None:
            cache.rows = list(self._session.connection().execute(live_instances_query()).all())
        return cache.rows if tiers is None else [row for row in cache.rows if row[_TIER_AT] in tiers]

    def _kept_live_rows(self) -> list[Any] | None:
        """The live rows a sole writer keeps (read now if it holds none); None on a shared database."""
        return None if self._live_rows is None else self._live_row_facts(None)

    def live_keys(self) -> set[str]:
        """The keys of every instance that may bill (one column: what garbage collection compares with)."""
        self.flush()
        query = select(InstanceRecord.key).where(InstanceRecord.state.in_(LIVE_STATES))
        return set(self._session.scalars(query))

    def live_shares(self, excluding: Collection[str]) -> dict[str, FleetShare]:
        """Per tier not in ``excluding``: what its live instances bill and how many count toward its size —
        all the fleet budget needs of tiers another daemon acts on, without building their entities."""
        shares: dict[str, FleetShare] = {}
        for tier, state, surge, count, spend, _oldest in self._session.execute(live_groups_query(excluding=excluding)):
            share = shares.get(tier, FleetShare(0.0, 0))
            counted = count if is_counted(InstanceState(state), surge=bool(surge)) else 0
            shares[tier] = FleetShare(share.spend + float(spend or 0.0), share.counted + counted)
        return shares

    def add(self, inst: Instance) -> None:
        self._entities[inst.key] = inst
        self._stored[inst.key] = None

    def held_ids(self, keys: Iterable[str]) -> dict[str, str | None]:
        """For each of ``keys`` with a live row, the provider id that row holds (None: none adopted yet), as
        stored now, with this unit's own changes: garbage collection keeps that instance and no other under
        the key."""
        wanted = set(keys)
        kept = self._kept_live_rows()
        if kept is not None:  # a sole writer's kept rows hold the answer (the query cost a quarter of a busy slice)
            held = {row[_KEY_AT]: row[_PROVIDER_ID_AT] for row in kept if row[_KEY_AT] in wanted}
        else:
            # One read of every live row's (key, provider id) on the session's connection: the keys asked are
            # nearly all of them (every listed instance under a live key), where one IN query per 500 keys
            # through the ORM built and bound 20 statements a tick at 10,000 instances.
            query = select(InstanceRecord.key, InstanceRecord.provider_id).where(InstanceRecord.state.in_(LIVE_STATES))
            rows = self._session.connection().execute(query).all()
            held = {key: provider_id for key, provider_id in rows if key in wanted}
        # This unit's entities as a flush would store them, laid over the rows instead of flushing first: a
        # flush compares every tracked entity (7–9 ms at 10,000), and the commit after garbage collection
        # flushes anyway.
        for key, inst in self._entities.items():
            if key not in wanted:
                continue
            if inst.state in LIVE:
                held[key] = inst.provider_id
            else:
                held.pop(key, None)
        return held

    def stored_states(self, keys: Iterable[str]) -> dict[str, str]:
        """The state of each of ``keys`` that a stored row (live or ended) has, as stored now — rows other
        daemons committed since this unit of work began included."""
        self.flush()
        wanted = list(keys)
        found: dict[str, str] = {}
        for i in range(0, len(wanted), 500):
            query = select(InstanceRecord.key, InstanceRecord.state).where(InstanceRecord.key.in_(wanted[i : i + 500]))
            found.update({key: state for key, state in self._session.execute(query)})
        return found

    def flush(self) -> None:
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []  # by primary key: {"key": ..., changed columns}
        last = self._stored
        for key, inst in self._entities.items():
            now = _values(inst)
            stored = last[key]
            if now == stored:
                continue
            if stored is None:
                inserts.append(_stored(dict(zip(_FIELDS, now, strict=True))))
            else:
                changed = {name: new for name, new, old in zip(_FIELDS, now, stored, strict=True) if new != old}
                updates.append({"key": key, **_stored(changed)})
            last[key] = now
        if inserts:
            self._session.execute(insert(InstanceRecord), inserts)
        if updates:  # executemany, grouped by the set of changed columns
            self._session.execute(update(InstanceRecord), updates)
        self.wrote = self.wrote or bool(inserts or updates)
