"""Scale-to-zero: activate after sustained backlog, zero only after sustained idleness, never with work in flight."""

from __future__ import annotations

from tests.unit.policies.helpers import Runner, spec

STZ = spec(kind="scale-to-zero", queue_per_instance=20, activate_after="30s", idle_after="5m")


def test_backlog_for_29s_holds_and_31s_activates_to_ceil_depth_over_per_instance() -> None:
    run = Runner(STZ)
    assert run.tick(0, queue_depth=37, in_flight=0).desired == 0
    held = run.tick(29, queue_depth=37, in_flight=0)
    assert held.desired == 0
    assert "29s" in held.reason and "scale out after 30s" in held.reason
    fired = run.tick(31, queue_depth=37, in_flight=0)
    assert fired.desired == 2  # ceil(37 / 20)
    assert fired.reason == "queue 37 > 20 × 0 for 31s → 2"
    assert fired.demand == 2


def test_one_waiting_task_activates_at_least_one_instance() -> None:
    run = Runner(STZ)
    run.tick(0, queue_depth=1, in_flight=0)
    assert run.tick(31, queue_depth=1, in_flight=0).desired == 1


def test_an_empty_queue_in_between_restarts_the_activation_clock() -> None:
    run = Runner(STZ)
    run.tick(0, queue_depth=5, in_flight=0)
    run.tick(15, queue_depth=0, in_flight=0)
    run.tick(20, queue_depth=5, in_flight=0)
    assert run.tick(49, queue_depth=5, in_flight=0).desired == 0  # only 29 s since the restart
    assert run.tick(51, queue_depth=5, in_flight=0).desired == 1


def test_idle_for_4m59s_holds_and_5m01s_scales_to_zero() -> None:
    run = Runner(STZ, current=2)
    run.tick(0, queue_depth=0, in_flight=0)
    held = run.tick(299, queue_depth=0, in_flight=0)
    assert held.desired == 2
    assert "4m59s" in held.reason and "scale to zero after 5m" in held.reason
    zero = run.tick(301, queue_depth=0, in_flight=0)
    assert zero.desired == 0
    assert zero.reason == "queue 0 and nothing in flight for 5m1s → 0"


def test_tasks_in_flight_keep_an_instance_until_they_finish_plus_idle_after() -> None:
    run = Runner(STZ, current=2)
    # 3 tasks running, nothing waiting: shrink to what the running work needs (1), never to 0.
    last = run.ticks(0, 900, 10, queue_depth=0, in_flight=3)
    assert last.desired == 1
    assert all(d.desired >= 1 for d in run.decisions)
    run.tick(910, queue_depth=0, in_flight=0)  # the work finished
    assert run.tick(910 + 299, queue_depth=0, in_flight=0).desired == 1
    assert run.tick(910 + 301, queue_depth=0, in_flight=0).desired == 0


def test_never_zero_while_in_flight_even_when_current_is_zero() -> None:
    run = Runner(STZ, current=0)
    decision = run.tick(0, queue_depth=0, in_flight=2)
    assert decision.desired == 1
    assert "2 in flight" in decision.reason


def test_scales_out_further_when_backlog_outgrows_current() -> None:
    run = Runner(STZ, current=2)
    run.tick(0, queue_depth=100, in_flight=40)
    assert run.tick(29, queue_depth=100, in_flight=40).desired == 2
    grown = run.tick(31, queue_depth=100, in_flight=40)
    assert grown.desired == 5  # ceil(100 / 20)
    assert "queue 100 > 20 × 2" in grown.reason


def test_backlog_within_capacity_does_not_scale_out() -> None:
    run = Runner(STZ, current=2)
    assert run.ticks(0, 120, 10, queue_depth=40, in_flight=40).desired == 2  # 40 ≤ 20 × 2


def test_scale_in_between_counts_sizes_for_the_peak_load_of_the_window() -> None:
    run = Runner(STZ, current=5)
    run.ticks(0, 240, 10, queue_depth=0, in_flight=30)  # needs 2
    run.ticks(250, 290, 10, queue_depth=0, in_flight=10)  # needs 1
    assert run.tick(299, queue_depth=0, in_flight=10).desired == 5
    shrunk = run.tick(301, queue_depth=0, in_flight=10)
    assert shrunk.desired == 2  # the window's peak (30 in flight), not the last sample (10)
    assert "peak 30" in shrunk.reason
    # a further step down needs another idle_after at the lower load
    assert run.tick(301 + 299, queue_depth=0, in_flight=10).desired == 2
    assert run.tick(301 + 301, queue_depth=0, in_flight=10).desired == 1


def test_unknown_queue_depth_holds_and_says_so() -> None:
    run = Runner(STZ, current=3)
    decision = run.ticks(0, 900, 10, queue_depth=None, in_flight=0)
    assert decision.desired == 3
    assert "queue_depth unknown" in decision.reason


def test_unknown_in_flight_never_goes_to_zero_but_backlog_still_scales_out() -> None:
    run = Runner(STZ, current=1)
    idle = run.ticks(0, 900, 10, queue_depth=0, in_flight=None)
    assert idle.desired == 1
    assert "in_flight unknown" in idle.reason
    run.tick(1000, queue_depth=90, in_flight=None)
    assert run.tick(1031, queue_depth=90, in_flight=None).desired == 5


def test_a_missing_reading_breaks_the_idle_clock() -> None:
    run = Runner(STZ, current=2)
    run.ticks(0, 200, 10, queue_depth=0, in_flight=0)
    run.tick(250, queue_depth=None, in_flight=0)
    run.tick(260, queue_depth=0, in_flight=0)
    assert run.tick(301, queue_depth=0, in_flight=0).desired == 2  # idle only since 260
    assert run.tick(260 + 301, queue_depth=0, in_flight=0).desired == 0
