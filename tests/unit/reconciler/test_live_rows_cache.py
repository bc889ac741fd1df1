"""A sole writer's store keeps the live instance rows between units of work: it must read exactly what a
store that queries every time reads, through commits, rollbacks and writes outside the repository."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text

from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.domain.instance import Instance, InstanceState


def _store(*, sole_writer: bool) -> Store:
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    return Store(engine, sole_writer=sole_writer)


def _intent(key: str, tier: str = "web") -> Instance:
    return Instance(
        key=key, tier=tier, state=InstanceState.PENDING, provider="p", offer_id="o", gpu="H100", region="r",
        capacity="on-demand", price_per_hour=2.0, created_at=1.0, updated_at=1.0,
    )  # fmt: skip


def _live(store: Store, tiers: set[str] | None = None) -> list[tuple[str, str]]:
    with store.unit_of_work() as uow:
        return sorted((i.key, i.state.value) for i in uow.instances.live(tiers))


@pytest.mark.parametrize("sole_writer", [True, False])
def test_the_kept_rows_read_what_a_fresh_query_reads(sole_writer: bool) -> None:
    store = _store(sole_writer=sole_writer)
    with store.unit_of_work() as uow:
        uow.instances.add(_intent("a"))
        uow.instances.add(_intent("b", tier="api"))
        uow.commit()
    assert _live(store) == [("a", "pending"), ("b", "pending")]
    assert _live(store, {"api"}) == [("b", "pending")]

    with store.unit_of_work() as uow:  # changed, read back within the unit (flushed), never committed
        inst = next(i for i in uow.instances.live() if i.key == "a")
        inst.end(InstanceState.FAILED, 5.0, "lost", "lost")
        assert [i.key for i in uow.instances.live()] == ["b"]
    assert _live(store) == [("a", "pending"), ("b", "pending")]  # the rollback undid it

    with store.unit_of_work() as uow:
        inst = next(i for i in uow.instances.live() if i.key == "a")
        inst.end(InstanceState.FAILED, 5.0, "lost", "lost")
        uow.commit()
    assert _live(store) == [("b", "pending")]

    with store.sessions() as s:  # a write that is not the repository's
        s.execute(text("UPDATE instances SET state = 'ready' WHERE key = 'b'"))
        s.commit()
    assert _live(store) == [("b", "ready")]
    assert _live(store, {"web"}) == []


def _instance_selects(store: Store) -> list[str]:
    """The SELECTs on the instances table the store runs from now on (filled as they run)."""
    selects: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM instances" in statement:
            selects.append(statement)

    return selects


def test_a_sole_writer_reads_the_rows_once_until_they_change() -> None:
    store = _store(sole_writer=True)
    selects = _instance_selects(store)

    with store.unit_of_work() as uow:
        uow.instances.add(_intent("a"))
        uow.commit()
    for _ in range(3):
        _live(store)
    assert len(selects) == 1
    with store.unit_of_work() as uow:
        (inst,) = uow.instances.live()
        inst.state = InstanceState.READY
        uow.commit()
    assert _live(store) == [("a", "ready")]
    assert len(selects) == 2


@pytest.mark.parametrize("sole_writer", [True, False])
def test_held_ids_read_what_is_stored_and_a_sole_writer_reads_them_from_the_kept_rows(sole_writer: bool) -> None:
    store = _store(sole_writer=sole_writer)
    selects = _instance_selects(store)

    with store.unit_of_work() as uow:
        for key in ("a", "b", "c"):
            uow.instances.add(_intent(key))
        uow.commit()
    with store.unit_of_work() as uow:
        a, _b, c = sorted(uow.instances.live(), key=lambda i: i.key)
        a.provider_id = "pa"
        c.end(InstanceState.FAILED, 5.0, "lost", "lost")
        uow.commit()
    with store.unit_of_work() as uow:
        uow.instances.live()
        before = len(selects)
        held = uow.instances.held_ids(["a", "b", "c", "z"])
        reads = len(selects) - before
    assert held == {"a": "pa", "b": None}  # an ended row holds nothing; an unknown key is absent
    assert reads == (0 if sole_writer else 1)


@pytest.mark.parametrize("sole_writer", [True, False])
def test_held_ids_see_the_units_own_changes_without_writing_them(sole_writer: bool) -> None:
    store = _store(sole_writer=sole_writer)
    with store.unit_of_work() as uow:
        for key in ("a", "b", "c"):
            uow.instances.add(_intent(key))
        uow.commit()
    with store.unit_of_work() as uow:
        a, _b, c = sorted(uow.instances.live(), key=lambda i: i.key)
        a.provider_id = "pa"  # adopted this tick, not stored yet
        c.end(InstanceState.FAILED, 5.0, "lost", "lost")
        uow.instances.add(_intent("d"))  # a new intent, not stored yet
        held = uow.instances.held_ids(["a", "b", "c", "d", "z"])
        assert held == {"a": "pa", "b": None, "d": None}  # as a flush would store them
        assert not uow.instances.wrote  # nothing was sent: the commit flushes once
