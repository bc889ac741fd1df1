"""Batch tiers by queue-time target: bursts sized from learned throughput and boot time; idle workers retire."""

from __future__ import annotations

from scalectl.policies import batch
from scalectl.policies.types import Bounds
from tests.unit.policies.batch_learned import MU, POLICY, learned_runner, measured_boots
from tests.unit.policies.helpers import Runner, spec


def test_before_throughput_is_known_the_burst_is_sized_by_queue_per_instance() -> None:
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=0)
    run.tick(0, queue_depth=500, in_flight=0)
    assert run.tick(30, queue_depth=500, in_flight=0).desired == 25


def test_the_task_time_and_the_slots_give_the_throughput() -> None:
    learned = learned_runner().state.learned
    assert batch.slots(learned) == 8
    throughput = batch.throughput(learned)
    assert throughput is not None and abs(throughput - MU) < 1e-3


def test_a_burst_gets_the_fewest_instances_that_start_it_within_max_wait() -> None:
    run = measured_boots(learned_runner(), 180, 180, 180)
    run.current = 0
    decision = run.tick(8000, current=0, queue_depth=500, in_flight=0, arrivals=500)
    # T = 600 s × 0.85 = 510 s, boot 180 s: a new instance starts 8 at once, then one per task end from
    # 45 s on: 8 + 0.0889 × (330 − 45) = 33.3 tasks; 500 ÷ 33.3 = 15.01 → 16 (15 would start 500 at 0.99)
    assert decision.desired == 16
    assert "queue 500 (oldest 0s) within 10m: 5.33 tasks/min and 8 at once per instance, boot 3m → 16" in (
        decision.reason
    )


def test_until_three_boots_are_measured_a_boot_takes_five_minutes() -> None:
    decision = learned_runner().tick(8000, current=0, queue_depth=500, in_flight=0, arrivals=500)
    # 8 + 0.0889 × (510 − 300 − 45) = 22.7 tasks per new instance; 500 ÷ 22.7 = 22.06 → 23
    assert decision.desired == 23
    assert "boot 5m → 23" in decision.reason


def test_each_boot_counts_as_measured_not_all_as_the_slowest() -> None:
    """Boots of 2, 2.5 and 5 minutes: the early instances start most of the burst."""
    run = measured_boots(learned_runner(), 120, 150, 300)
    decision = run.tick(8000, current=0, queue_depth=500, in_flight=0, arrivals=500)
    # per new instance: (8 + 0.0889 × (390 − 45), 8 + 0.0889 × (360 − 45), 8 + 0.0889 × (210 − 45)) =
    # (38.7, 36.0, 22.7), 32.4 on average: 500 ÷ 32.4 = 15.4 → 16; all at the slowest boot would ask 23
    assert decision.desired == 16
    assert "boot 5m → 16" in decision.reason  # the reason shows the 90th percentile


def test_a_longer_max_wait_buys_fewer_instances() -> None:
    run = learned_runner()
    relaxed = spec(kind="scale-to-zero", max_wait="30m")
    run.policy = relaxed
    # T = 1530 s, boot 300 s: 8 + 0.0889 × (1230 − 45) = 113 tasks per new instance; 500 ÷ 113 = 4.4 → 5
    assert run.tick(8000, current=0, queue_depth=500, in_flight=0, arrivals=500).desired == 5


def test_idle_workers_retire_after_a_minute_and_the_tier_empties_when_nothing_is_left() -> None:
    run = learned_runner()
    run.current = 10
    # spare from 7210 s: 16 tasks occupy 2 of the 10
    assert run.tick(7210, queue_depth=0, in_flight=16, arrivals=0).desired == 10
    assert run.tick(7269, queue_depth=0, in_flight=16, arrivals=0).desired == 10
    decision = run.tick(7270, queue_depth=0, in_flight=16, arrivals=0)
    assert decision.desired == 2  # 16 tasks at 8 per instance
    for t in range(7280, 7400, 10):
        run.tick(t, queue_depth=0, in_flight=0, arrivals=0)
    assert run.current == 0


def test_unknown_signals_hold_and_never_go_to_zero() -> None:
    run = learned_runner()
    for t in range(8000, 9000, 30):
        assert run.tick(t, queue_depth=None, in_flight=None).desired == 4


def test_the_ask_does_not_grow_while_the_boots_it_asked_for_are_under_way() -> None:
    run = learned_runner()
    first = run.tick(8000, current=0, queue_depth=500, in_flight=0, arrivals=500).desired
    for t in range(8010, 8180, 10):  # the 16 instances boot (3 minutes); the backlog still waits
        assert run.tick(t, current=first, booting=first, queue_depth=500, in_flight=0, arrivals=0).desired == first


def test_a_burst_after_a_long_trickle_is_timed_from_its_own_arrival() -> None:
    run = measured_boots(learned_runner(), 180, 180, 180)
    for t in range(8000, 10000, 30):  # a trickle keeps one task queued for half an hour; the worker keeps up
        run.tick(t, current=1, queue_depth=1, in_flight=8, arrivals=MU * 30)
    decision = run.tick(10000, current=1, queue_depth=500, in_flight=8, arrivals=500)
    first = decision.desired
    # the trickle's queue turned over (its oldest task waited 30 s, not half an hour); by the burst's
    # deadline the ready worker starts 0.0889 × 510 = 45 of it, each new one 33.3: 456 ÷ 33.3 = 13.7 → 14 more
    assert first == 15
    for t in range(10010, 10180, 10):  # the one ready worker keeps working while the others boot
        depth = 500 - (t - 10000) * MU
        asked = run.tick(t, current=first, booting=first - 1, queue_depth=depth, in_flight=8, arrivals=0).desired
        assert asked == first


def test_each_cohort_starts_by_its_own_deadline() -> None:
    """40 tasks queued 6 minutes ago (a worker was lost) are due in 1m30s: the ready worker and new boots
    cannot start them all by then, so they are due as soon as a new instance can be; 200 just queued are
    due in 8m30s."""
    run = measured_boots(learned_runner(), 180, 180, 180)
    run.tick(8000, current=1, queue_depth=40, in_flight=8, arrivals=40)
    for t in range(8030, 8360, 30):  # the one worker is stuck: nothing starts for 6 minutes
        run.tick(t, current=1, queue_depth=40, in_flight=8, arrivals=0)
    decision = run.tick(8360, current=1, queue_depth=240, in_flight=8, arrivals=200)
    assert "queue 240 (oldest 6m) within 10m" in decision.reason
    # the old 40: due at 180 s boot + 90 s; the worker starts 0.0889 × 270 = 24 by then, a new instance
    # 8 + 0.0889 × (90 − 45) = 12: 16 ÷ 12 → 2 more. All 240: due in 510 s; the worker starts 45, a new one
    # 33.3: 195 ÷ 33.3 = 5.9 → 6 more, the most any cohort needs
    assert decision.desired == 7


def test_a_trickle_teaches_the_task_time_but_not_the_slots() -> None:
    """One task every 30 s on one worker: the task time shows (Little's law), how many run at once does not."""
    run = Runner(POLICY, bounds=Bounds(min=0, max=64), current=1)
    for t in range(0, 1800, 30):
        run.tick(t, current=1, queue_depth=1 if t % 60 == 0 else 0, in_flight=3, arrivals=1)
    learned = run.state.learned
    assert abs(learned["batch.busy"] / learned["batch.done"] - 90) < 90 * 0.03
    assert batch.slots(learned) is None and batch.throughput(learned) is None


def test_the_slot_count_is_the_one_seen_most_not_the_highest() -> None:
    """A spot notice: two of four workers drain (no longer counted) but finish their 16 tasks while a backlog
    waits; 40 tasks on 2 ready workers reads as 20 each for a few ticks."""
    run = learned_runner()
    for t in range(7230, 7290, 10):
        run.tick(t, current=2, queue_depth=50, in_flight=40, arrivals=0)
    assert batch.slots(run.state.learned) == 8


def hourly_target(max_wait: str, *boots: float) -> Runner:
    run = measured_boots(learned_runner(), *(boots or (180, 180, 180)))
    run.policy = spec(kind="scale-to-zero", max_wait=max_wait)
    return run


def test_a_trickle_at_zero_waits_for_the_last_safe_launch() -> None:
    """max_wait 30m, boots of 2–3 minutes: a task queued at 8000 s is due at 9530 s (less 15 %); one instance
    launched 30 s later still starts it after the slowest boot until 9530 − 180 − 30 = 9320 s."""
    run = hourly_target("30m", 120, 150, 180)
    run.current = 0
    first = run.tick(8000, current=0, queue_depth=1, in_flight=0, arrivals=1)
    assert first.desired == 0
    assert "one launched 30s from now starts it in time after the slowest boot (3m) → wait, 0" in first.reason
    assert run.tick(9310, current=0, queue_depth=3, in_flight=0, arrivals=2).desired == 0
    assert run.tick(9330, current=0, queue_depth=3, in_flight=0, arrivals=0).desired == 1


def test_a_queue_one_instance_cannot_start_in_time_launches_at_once() -> None:
    run = hourly_target("30m", 120, 150, 180)
    run.current = 0
    # one instance ready in 210 s starts 8 + 0.0889 × (1530 − 210 − 45) = 121 by the deadline: 200 is more;
    # launched now, each starts 126.7 on average over the measured boots: 200 ÷ 126.7 → 2
    assert run.tick(8000, current=0, queue_depth=200, in_flight=0, arrivals=200).desired == 2


def test_where_rounds_do_not_pay_a_lone_task_launches_at_once() -> None:
    run = hourly_target("10m", 120, 150, 180)
    run.current = 0
    assert run.tick(8000, current=0, queue_depth=1, in_flight=0, arrivals=1).desired == 1


def test_without_three_measured_boots_nothing_waits() -> None:
    run = learned_runner()
    run.policy = spec(kind="scale-to-zero", max_wait="30m")
    run.current = 0
    assert run.tick(8000, current=0, queue_depth=1, in_flight=0, arrivals=1).desired == 1


def test_a_long_max_wait_serves_a_trickle_in_rounds() -> None:
    """max_wait 1h, boots of 3 minutes, 90 s tasks on 8 slots: a round buys 3060 − 30 − 180 + 180 = 3030 s for
    a boot and a drain of 90 × H(8) = 245 s: 86 % saved. Once the queue is empty the worker drains at once."""
    run = hourly_target("1h")
    decision = run.tick(7230, current=1, queue_depth=0, in_flight=8, arrivals=0)
    assert decision.desired == 0
    assert "the next tasks can wait for a new instance within 1h (86% of a kept worker's time saved)" in (
        decision.reason
    )
    assert "→ 0 (what runs finishes)" in decision.reason


def test_a_short_max_wait_keeps_its_worker_for_a_trickle() -> None:
    """10 minutes: a round buys 510 − 30 − 180 + 180 = 480 s for 180 + 245 s of boot and drain, 11 % saved,
    under the 20 % a round must save: the worker stays while it has tasks."""
    run = hourly_target("10m")
    assert run.tick(7230, current=1, queue_depth=0, in_flight=3, arrivals=1).desired == 1


def test_rounds_need_a_fifth_of_the_worker_saved() -> None:
    """The saving is 20 % at 0.85 × max_wait − 30 = (180 + 245) ÷ 0.8 = 531 s: max_wait 10m59s or so."""
    assert hourly_target("10m50s").tick(7230, current=1, queue_depth=0, in_flight=3, arrivals=1).desired == 1
    assert hourly_target("11m10s").tick(7230, current=1, queue_depth=0, in_flight=3, arrivals=1).desired == 0


def test_rounds_leave_busy_workers_alone() -> None:
    """Two workers' worth of tasks in flight: the rule is for a trickle one worker runs, not for the tail of a
    burst (its spare workers retire after a minute, as before)."""
    run = hourly_target("1h")
    assert run.tick(7230, current=3, queue_depth=0, in_flight=16, arrivals=0).desired == 3


def test_draining_tasks_do_not_launch_a_worker() -> None:
    """After the round's worker drains (it still runs 5 tasks) an empty queue asks for nothing."""
    run = hourly_target("1h")
    run.tick(7230, current=1, queue_depth=0, in_flight=8, arrivals=0)
    decision = run.tick(7260, current=0, queue_depth=0, in_flight=5, arrivals=0)
    assert decision.desired == 0
    assert decision.reason == "queue 0, 5 in flight on draining instances → hold 0"


def never_queued(max_wait: str) -> Runner:
    """A light trickle: one task every 30 s, three running on the one worker, nothing ever queued: the slot
    count never shows (no backlog), only that a worker runs three at least."""
    run = measured_boots(
        Runner(spec(kind="scale-to-zero", max_wait=max_wait), bounds=Bounds(min=0, max=64)), 180, 180, 180
    )
    for t in range(0, 1800, 30):
        run.tick(t, current=1, queue_depth=0, in_flight=3, arrivals=1)
    return run


def test_a_tier_that_never_queues_serves_its_trickle_in_rounds_on_a_floor_of_its_slots() -> None:
    run = never_queued("1h")
    learned = run.state.learned
    assert batch.slots(learned) is None and batch.least_slots(learned) == 3
    decision = run.decisions[-1]
    # drain 90 × H(3) = 165 s; a round buys 3060 − 30 − 180 + 180 = 3030 s: 1 − 345 ÷ 3030 = 89 %
    assert decision.desired == 0
    assert "(89% of a kept worker's time saved) → 0" in decision.reason


def test_a_burst_before_the_slots_show_is_sized_by_queue_per_instance_as_before() -> None:
    """Between rounds (no worker up) 500 tasks arrive. On the floor of 3 slots each new instance would start
    3 + 3/90 × (3060 − 180 − 45) = 97.5 by the deadline: 6 instances, and on a floor far below the true count
    many more. More than one instance on the floor is left to the queue_per_instance rules (500 ÷ 20), as
    when nothing is learned, until a backlog on a ready worker shows its slots."""
    run = never_queued("1h")
    assert run.current == 0
    run.tick(1800, current=0, queue_depth=500, in_flight=0, arrivals=500)
    assert run.tick(1830, current=0, queue_depth=500, in_flight=0, arrivals=0).desired == 25
