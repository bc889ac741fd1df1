from __future__ import annotations

import numpy as np

from scalectl.simulator.batch_pool import BatchPool


def _run(pool: BatchPool, t0: float, t1: float, tasks: list[tuple[float, float]] | None = None, tick: float = 5.0):
    tasks = sorted(tasks or [])
    t = t0
    while t < t1:
        batch = [x for x in tasks if t <= x[0] < t + tick]
        q = np.array([x[0] for x in batch])
        r = np.array([x[1] for x in batch])
        pool.advance(t, t + tick, q, r)
        t += tick


def test_tasks_queue_and_run_with_per_instance_concurrency() -> None:
    pool = BatchPool(concurrency=4)
    pool.set_instances(["w1", "w2"], now=0.0)
    _run(pool, 0, 10, [(1.0, 100.0)] * 20)
    assert pool.in_flight == 8 and pool.queue_depth == 12
    signals = pool.signals()
    assert signals.queue_depth == 12 and signals.in_flight == 8 and signals.ttft_p95_s is None
    _run(pool, 10, 400)
    assert pool.record.completed == 20 and pool.queue_depth == 0 and pool.in_flight == 0
    waits = sorted(pool.record.waits)
    assert waits[:8] == [0.0] * 8 and max(waits) > 199  # the third wave waited two run times


def test_interrupted_instance_loses_no_task() -> None:
    pool = BatchPool(concurrency=8)
    pool.set_instances(["a", "b"], now=0.0)
    _run(pool, 0, 30, [(float(i) * 0.1, 60.0) for i in range(40)])
    assert pool.in_flight == 16
    moved = pool.interrupt(["a"], now=30.0)
    assert moved == 8 and pool.record.retries == 8
    assert pool.accounted() == pool.record.created == 40
    _run(pool, 30, 50)
    pool.set_instances(["b", "c"], now=50.0)  # a replacement arrives
    _run(pool, 50, 600)
    assert pool.record.completed == 40
    assert pool.accounted() == 40
    assert len(pool.record.waits) == 40  # each task's first start counted once


def test_ready_instance_that_vanishes_is_an_interruption_but_draining_finishes() -> None:
    pool = BatchPool(concurrency=2)
    pool.set_instances(["a", "b"], now=0.0)
    _run(pool, 0, 5, [(0.0, 50.0)] * 4)
    pool.set_instances(["a"], draining=["b"], now=5.0)  # b drains: keeps its two tasks, takes no more
    _run(pool, 5, 10, [(6.0, 50.0)])
    assert pool.queue_depth == 1
    pool.set_instances(["a"], now=10.0)  # b retired after draining: its tasks still finish
    _run(pool, 10, 60)
    assert pool.record.retries == 0 and pool.record.completed == 4
    pool.set_instances([], now=60.0)  # a vanished while ready: its task goes back to the queue
    assert pool.record.retries == 1 and pool.queue_depth == 1
    assert pool.accounted() == pool.record.created == 5
