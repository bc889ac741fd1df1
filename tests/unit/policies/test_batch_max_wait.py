"""Batch tiers by queue-time target: bursts sized from learned throughput and boot time; idle workers retire."""

from __future__ import annotations

from policies.types import Bounds
from tests.unit.policies.helpers import Runner, spec

POLICY = spec(kind="scale-to-zero", max_wait="10m", queue_per_instance=20)


def learned_runner() -> Runner:
    """4 busy workers, 8 tasks each, 90 s per task: 8 / 90 tasks per instance-second."""
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=4)
    depth = 400.0
    for t in range(0, 300, 10):
        run.tick(t, current=4, queue_depth=depth, in_flight=32, arrivals=0)
        depth -= 4 * 8 / 90 * 10
    run.tick(990, current=4, queue_depth=0, in_flight=0, arrivals=0)  # the backlog is gone: its clock stops
    return run


def test_before_throughput_is_known_the_burst_is_sized_by_queue_per_instance() -> None:
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=0)
    run.tick(0, queue_depth=500, in_flight=0)
    assert run.tick(30, queue_depth=500, in_flight=0).desired == 25


def test_a_burst_gets_the_fewest_instances_that_start_it_within_max_wait() -> None:
    run = learned_runner()
    assert abs(run.state.learned["batch.mu"] - 8 / 90) < 1e-3
    run.current = 0
    decision = run.tick(1000, current=0, queue_depth=500, in_flight=0, arrivals=500)
    # 600 s × 0.85 − 180 s boot = 330 s; 500 ÷ (0.0889 × 330) = 17.04 → 18
    assert decision.desired == 18
    assert "queue 500 within 10m: 5.33 tasks/min per instance, boot 3m → 18" in decision.reason


def test_a_longer_max_wait_buys_fewer_instances() -> None:
    run = learned_runner()
    relaxed = spec(kind="scale-to-zero", max_wait="30m")
    run.policy = relaxed
    # 1800 s × 0.85 − 180 s = 1350 s; 500 ÷ (0.0889 × 1350) = 4.2 → 5
    assert run.tick(1000, current=0, queue_depth=500, in_flight=0, arrivals=500).desired == 5


def test_idle_workers_retire_after_a_minute_and_the_tier_empties_when_nothing_is_left() -> None:
    run = learned_runner()
    run.current = 10
    # spare since the empty queue at 990 s
    assert run.tick(1000, queue_depth=0, in_flight=16, arrivals=0).desired == 10
    assert run.tick(1049, queue_depth=0, in_flight=16, arrivals=0).desired == 10
    decision = run.tick(1050, queue_depth=0, in_flight=16, arrivals=0)
    assert decision.desired == 2  # 16 tasks at 8 per instance
    for t in range(1070, 1200, 10):
        run.tick(t, queue_depth=0, in_flight=0, arrivals=0)
    assert run.current == 0


def test_unknown_signals_hold_and_never_go_to_zero() -> None:
    run = learned_runner()
    for t in range(1000, 2000, 30):
        assert run.tick(t, queue_depth=None, in_flight=None).desired == 4


def test_the_ask_does_not_grow_while_the_boots_it_asked_for_are_under_way() -> None:
    run = learned_runner()
    first = run.tick(1000, current=0, queue_depth=500, in_flight=0, arrivals=500).desired
    for t in range(1010, 1180, 10):  # the 18 instances boot (3 minutes); the backlog still waits
        assert run.tick(t, current=first, booting=first, queue_depth=500, in_flight=0, arrivals=0).desired == first


def test_a_burst_after_a_long_trickle_gets_its_own_clock() -> None:
    run = learned_runner()
    for t in range(1000, 3000, 30):  # a trickle keeps one task queued for half an hour; the worker keeps up
        run.tick(t, current=1, queue_depth=1, in_flight=8, arrivals=8 / 90 * 30)
    decision = run.tick(3000, current=1, queue_depth=500, in_flight=8, arrivals=500)
    first = decision.desired
    assert first == 17  # the clock starts with the burst: 1 worker now, the rest after a 3-minute boot
    for t in range(3010, 3180, 10):  # the one ready worker keeps working while the others boot
        depth = 500 - (t - 3000) * 8 / 90
        asked = run.tick(t, current=first, booting=first - 1, queue_depth=depth, in_flight=8, arrivals=0).desired
        assert asked == first


def test_a_trickle_does_not_teach_a_throughput() -> None:
    """One task every 30 s on one worker: its pace is the arrivals', not what the worker could do."""
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=1)
    for t in range(0, 1800, 30):
        run.tick(t, current=1, queue_depth=1 if t % 60 == 0 else 0, in_flight=3, arrivals=1)
    assert "batch.mu" not in run.state.learned
