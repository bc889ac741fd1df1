"""The unit of work: instances are entities mapped onto rows; nothing is stored until ``commit``."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select

from scalectl.controller.store.db import make_engine
from scalectl.controller.store.instances import to_entity, to_row
from scalectl.controller.store.models import Base, EventRecord, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState


def _store() -> Store:
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    return Store(engine)


def _intent(key: str = "sc-web-1") -> Instance:
    return Instance(
        key=key, tier="web", state=InstanceState.PENDING, provider="p", offer_id="o", gpu="H100", region="r",
        capacity="on-demand", price_per_hour=2.0, created_at=1.0, updated_at=1.0,
    )  # fmt: skip


def _stored(store: Store) -> list[InstanceRecord]:
    with store.sessions() as s:
        return list(s.scalars(select(InstanceRecord)).all())


def test_an_intent_is_stored_only_at_commit_and_changes_are_written_back() -> None:
    store = _store()
    with store.unit_of_work() as uow:
        inst = _intent()
        uow.instances.add(inst)
        assert _stored(store) == []  # another session sees nothing before the commit
        uow.commit()
        assert [r.state for r in _stored(store)] == ["pending"]
        uow.record(inst.adopt("i-1", 2.0, created_at=None, address=None, price=None))
        assert uow.instances.live() == [inst]  # one entity per key within the unit
        uow.commit()
    (row,) = _stored(store)
    assert (row.state, row.provider_id, row.launched_at) == ("provisioning", "i-1", 2.0)
    with store.sessions() as s:
        assert [e.kind for e in s.scalars(select(EventRecord)).all()] == ["launched"]


def test_uncommitted_changes_are_dropped() -> None:
    store = _store()
    with store.unit_of_work() as uow:
        uow.instances.add(_intent())
        uow.commit()
    with store.unit_of_work() as uow:
        (inst,) = uow.instances.live()
        inst.end(InstanceState.FAILED, 5.0, "lost", "lost")
    assert [r.state for r in _stored(store)] == ["pending"]


def test_the_row_and_the_entity_carry_the_same_facts() -> None:
    inst = _intent()
    inst.start_draining(3.0, "scale in", interrupted=True, end_state=InstanceState.FAILED)
    back = to_entity(to_row(inst))
    assert back.state is InstanceState.DRAINING and back.end_state is InstanceState.FAILED
    assert dataclasses.asdict(back) == dataclasses.asdict(inst)
