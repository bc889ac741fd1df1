"""The Instance entity: each transition changes the instance and returns the event that records it."""

from __future__ import annotations

from scalectl.domain.instance import Instance, InstanceState


def _pending(**kw: object) -> Instance:
    values: dict[str, object] = dict(
        key="sc-web-1",
        tier="web",
        state=InstanceState.PENDING,
        provider="p",
        offer_id="o",
        gpu="H100",
        region="r",
        capacity="spot",
        price_per_hour=3.6,
        created_at=100.0,
        updated_at=100.0,
    )
    values.update(kw)
    return Instance(**values)  # type: ignore[arg-type]


def test_adopt_follows_the_provider_instance_and_says_launched() -> None:
    inst = _pending(next_attempt_at=130.0)
    event = inst.adopt("i-1", 120.0, created_at=110.0, address="10.0.0.1:8000", price=4.0)
    assert (inst.state, inst.provider_id, inst.launched_at, inst.address) == (
        InstanceState.PROVISIONING,
        "i-1",
        110.0,
        "10.0.0.1:8000",
    )
    assert inst.price_per_hour == 4.0 and inst.next_attempt_at is None
    assert (event.kind, event.key, event.tier, event.t) == ("launched", "sc-web-1", "web", 120.0)


def test_ready_is_stamped_once() -> None:
    inst = _pending(state=InstanceState.BOOTSTRAPPING)
    assert inst.mark_ready(200.0, "").kind == "ready"
    inst.move(InstanceState.READY, 300.0, "again", None)
    assert inst.ready_at == 200.0 and inst.reason == "again"


def test_draining_then_retiring_ends_in_the_state_draining_chose() -> None:
    inst = _pending(state=InstanceState.READY, provider_id="i-1", launched_at=0.0)
    event = inst.start_draining(3600.0, "launch timeout", end_state=InstanceState.FAILED, event="launch-timeout")
    assert (inst.state, inst.drain_started_at, event.kind) == (InstanceState.DRAINING, 3600.0, "launch-timeout")
    assert inst.counted is False
    retired = inst.retire(7200.0)
    assert inst.state is InstanceState.FAILED and retired.kind == "retired"
    assert inst.cost == 3.6 * 2  # two hours at $3.60 from launch
    assert inst.state.is_ended and not inst.state.is_live


def test_an_instance_never_created_costs_nothing() -> None:
    inst = _pending()
    event = inst.end(InstanceState.FAILED, 500.0, "no capacity", "no-capacity")
    assert inst.cost == 0.0 and inst.ended_at == 500.0 and event.message == "no capacity"


def test_a_surge_counts_only_once_ready() -> None:
    surge = _pending(state=InstanceState.BOOTSTRAPPING, surge=True)
    assert not surge.counted
    surge.mark_ready(1.0, "up")
    assert surge.counted


def test_the_ready_event_carries_the_boot_phases_create_running_serving() -> None:
    inst = _pending()
    inst.adopt("i-1", 110.0, created_at=None, address=None, price=None)
    inst.move(InstanceState.BOOTSTRAPPING, 190.0, "machine up; waiting for the server", "booted")
    event = inst.mark_ready(305.0, "server answers")
    assert inst.running_at == 190.0
    assert inst.boot_phases() == {"provisioning": 90.0, "bootstrapping": 115.0}
    assert event.message == "server answers (create→serving 205s; create→running 90s; running→serving 115s)"


def test_where_running_means_serving_the_server_phase_is_unknown_not_zero() -> None:
    inst = _pending()
    inst.adopt("i-1", 110.0, created_at=None, address=None, price=None)
    event = inst.move(InstanceState.READY, 250.0, "running", "ready")
    assert event is not None and "running→serving not seen" in event.message
    assert inst.boot_phases() == {"provisioning": 150.0, "bootstrapping": None}


def test_a_stopped_stretch_bills_the_disk_not_the_gpu() -> None:
    inst = _pending(state=InstanceState.READY, provider_id="i-1", launched_at=100.0, price_per_hour=3.6)
    inst.storage_per_hour = 0.36
    inst.move(InstanceState.STOPPED, 1000.0, "stopped", "stopped")  # 900 s at the GPU price
    assert inst.billing_per_hour == 0.36
    inst.move(InstanceState.PROVISIONING, 4600.0, "started again", "resumed")  # 3600 s at the disk's
    assert inst.stopped_at is None and inst.stopped_s == 3600.0 and inst.billing_per_hour == 3.6
    inst.move(InstanceState.STOPPED, 5500.0, "stopped", "stopped")  # 900 s more at the GPU price
    inst.end(InstanceState.TERMINATED, 7300.0, "deleted", "retired")  # 1800 s stopped again
    assert inst.cost == (1800 * 3.6 + 5400 * 0.36) / 3600.0


def test_a_stopped_machine_draining_to_deletion_still_bills_its_disk() -> None:
    inst = _pending(state=InstanceState.STOPPED, provider_id="i-1", launched_at=0.0, stopped_at=0.0)
    inst.storage_per_hour = 0.36
    inst.start_draining(3600.0, "pool member of an old server")
    assert inst.stopped_at == 0.0  # still stopped at the provider while it is deleted
    assert inst.cost_until(7200.0) == 0.72
