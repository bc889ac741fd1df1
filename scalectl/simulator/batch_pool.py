"""A batch tier: a Celery queue feeding instances that each run ``concurrency`` tasks at once.

Tasks are never lost: a task on an instance that is interrupted goes back to the head of the queue and
runs again from the start (Celery ``acks_late`` + ``reject_on_worker_lost``). A draining or retired
instance takes no new task but finishes the ones it has (Celery warm shutdown).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from scalectl.policies.types import Signals
from scalectl.simulator.requests import FloatArray


@dataclass(slots=True)
class _Task:
    queued_at: float
    runtime: float
    first_start: float = float("nan")
    attempts: int = 0


@dataclass(slots=True)
class BatchRecord:
    waits: list[float] = field(default_factory=list)  # first start - queued, per task that started
    created: int = 0
    completed: int = 0
    retries: int = 0
    busy_task_seconds: float = 0.0  # task run time that completed (useful work)
    timeline: list[tuple[float, int, int, int, int]] = field(default_factory=list)  # t1, arrivals, ready, run, queue


class BatchPool:
    def __init__(self, concurrency: int, window_s: float = 60.0) -> None:
        self.concurrency = concurrency
        self.window_s = window_s
        self._queue: deque[_Task] = deque()
        self._free: dict[str, int] = {}  # ready instance -> free slots
        self._draining: set[str] = set()
        self._running: dict[str, dict[int, tuple[float, _Task]]] = {}  # instance -> token -> (end, task)
        self._ends: list[tuple[float, int, str]] = []  # heap of (end, token, instance)
        self._token = 0
        self._recent: deque[tuple[float, int]] = deque()
        self._last_arrivals = 0
        self.record = BatchRecord()

    # ---- membership -------------------------------------------------------------------------------------
    def set_instances(self, ready: Iterable[str], draining: Iterable[str] = (), now: float = 0.0) -> None:
        ready_set, drain_set = set(ready) - set(draining), set(draining)
        for iid in list(self._free):
            if iid not in ready_set:
                del self._free[iid]
                if iid in drain_set or iid in self._draining:
                    self._draining.add(iid)
                else:
                    self.interrupt([iid], now)
        for iid in sorted(ready_set):  # sorted: dispatch order must not depend on string hashing
            if iid not in self._free:
                self._free[iid] = self.concurrency - len(self._running.get(iid, {}))
                self._draining.discard(iid)
        self._draining |= drain_set - ready_set
        # Instances gone from both sets after draining keep finishing their tasks (graceful).
        self._dispatch(now)

    def interrupt(self, ids: Iterable[str], now: float) -> int:
        """Instances lost without notice: their running tasks go back to the head of the queue."""
        moved = 0
        for iid in ids:
            self._free.pop(iid, None)
            self._draining.discard(iid)
            for _, task in sorted(self._running.pop(iid, {}).values(), key=lambda e: -e[1].queued_at):
                self._queue.appendleft(task)
                self.record.retries += 1
                moved += 1
        return moved

    # ---- time --------------------------------------------------------------------------------------------
    def advance(self, t0: float, t1: float, queued_at: FloatArray, runtime: FloatArray) -> None:
        arrivals = list(zip(queued_at.tolist(), runtime.tolist(), strict=True))
        self.record.created += len(arrivals)
        self._last_arrivals = len(arrivals)
        self._dispatch(t0)
        i = 0
        while True:
            next_arrival = arrivals[i][0] if i < len(arrivals) else np.inf
            next_end = self._ends[0][0] if self._ends else np.inf
            now = min(next_arrival, next_end)
            if now > t1 or now == np.inf:
                break
            if next_end <= next_arrival:
                _, token, iid = heapq.heappop(self._ends)
                entry = self._running.get(iid, {}).pop(token, None)
                if entry is None:
                    continue  # the instance was interrupted; the task is back in the queue
                self.record.completed += 1
                self.record.busy_task_seconds += entry[1].runtime
                if iid in self._free:
                    self._free[iid] += 1
                elif not self._running.get(iid):
                    self._running.pop(iid, None)
                    self._draining.discard(iid)
            else:
                self._queue.append(_Task(*arrivals[i]))
                i += 1
            self._dispatch(now)
        self._recent.append((t1, self._last_arrivals))
        while self._recent and self._recent[0][0] <= t1 - self.window_s:
            self._recent.popleft()
        self.record.timeline.append((t1, self._last_arrivals, len(self._free), self.in_flight, len(self._queue)))

    def _dispatch(self, now: float) -> None:
        while self._queue and self._free:
            iid = max(self._free, key=self._free.__getitem__)
            if self._free[iid] <= 0:
                return
            task = self._queue.popleft()
            if task.first_start != task.first_start:  # NaN: first start
                task.first_start = now
                self.record.waits.append(now - task.queued_at)
            task.attempts += 1
            self._free[iid] -= 1
            self._token += 1
            end = now + task.runtime
            self._running.setdefault(iid, {})[self._token] = (end, task)
            heapq.heappush(self._ends, (end, self._token, iid))

    # ---- observation -------------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return sum(len(r) for r in self._running.values())

    def running_on(self, iid: str) -> int:
        """Tasks running on one instance (what its Celery worker would finish before a warm shutdown)."""
        return len(self._running.get(iid, {}))

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def queued_since(self) -> list[float]:
        """When each task still in the queue was first queued."""
        return [task.queued_at for task in self._queue]

    def accounted(self) -> int:
        """Tasks the pool knows of: done + running + queued (equals ``record.created``: none lost)."""
        return self.record.completed + self.in_flight + self.queue_depth

    def signals(self) -> Signals:
        """What the Celery broker would say: pending messages and unacked (in-flight) tasks."""
        arrivals = sum(n for _, n in self._recent)
        return Signals(
            queue_depth=float(self.queue_depth),
            in_flight=float(self.in_flight),
            arrivals=float(self._last_arrivals),
            request_rate=arrivals / self.window_s,
        )
