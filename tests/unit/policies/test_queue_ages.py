"""The FIFO queue's cohorts: arrivals join the back, starts leave from the front."""

from __future__ import annotations

from scalectl.policies.queue_ages import MAX_COHORTS, advance, cohorts


def test_starts_take_the_oldest_first() -> None:
    learned = advance({}, now=0, depth=10, arrivals=10)
    learned = advance(learned, now=30, depth=15, arrivals=8)  # 3 of the first 10 started
    assert cohorts(learned) == [(0.0, 7.0), (30.0, 8.0)]
    learned = advance(learned, now=60, depth=5, arrivals=0)  # 10 more started: the rest of 0, 3 of 30
    assert cohorts(learned) == [(30.0, 5.0)]


def test_a_queue_that_turns_over_stays_young() -> None:
    learned: dict[str, float] = {}
    for t in range(0, 3600, 30):  # two tasks queued at any moment, each starting within a tick
        learned = advance(learned, now=t, depth=2, arrivals=2)
    assert cohorts(learned) == [(3570.0, 2.0)]


def test_without_arrivals_growth_counts_and_a_steady_queue_ages() -> None:
    """A broker that reports no arrivals: the waits read longer than they are, never shorter."""
    learned = advance({}, now=0, depth=4, arrivals=None)
    learned = advance(learned, now=30, depth=4, arrivals=None)
    assert cohorts(learned) == [(0.0, 4.0)]
    learned = advance(learned, now=60, depth=10, arrivals=None)
    assert cohorts(learned) == [(0.0, 4.0), (60.0, 6.0)]


def test_tasks_back_from_a_lost_worker_join_the_back() -> None:
    learned = advance({}, now=0, depth=5, arrivals=5)
    learned = advance(learned, now=30, depth=13, arrivals=0)  # 8 redelivered
    assert cohorts(learned) == [(0.0, 5.0), (30.0, 8.0)]


def test_an_empty_queue_forgets_and_the_cohorts_are_bounded() -> None:
    learned: dict[str, float] = {"other": 1.0}
    for i in range(MAX_COHORTS + 5):
        learned = advance(learned, now=i * 30, depth=i + 1, arrivals=1)
    kept = cohorts(learned)
    assert len(kept) == MAX_COHORTS and sum(n for _, n in kept) == MAX_COHORTS + 5
    assert kept[-1][0] == (MAX_COHORTS - 1) * 30  # later arrivals joined the newest cohort: timed older
    learned = advance(learned, now=9999, depth=0, arrivals=0)
    assert cohorts(learned) == [] and learned["other"] == 1.0
