"""What waits in a first-in-first-out task queue, grouped by when it was queued, kept in the policy state.

Each tick, this tick's arrivals join the back as one cohort and the tasks that started (queued a tick
ago + arrivals − queued now) leave from the front, oldest cohort first. So the oldest cohort's time is
the oldest waiting task's, and a queue that stays a few tasks long because it turns over does not look
old. Where the source reports no arrivals (a Celery broker), growth of the queue counts as arrivals and
nothing leaves while it holds steady: the waits read longer than they are, which asks for more instances,
not fewer. Tasks that come back without arriving (a lost worker's, redelivered) join the back too.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "batch.queued."
MAX_COHORTS = 16
MERGE_S = 10.0  # arrivals this close to the newest cohort join it


def cohorts(learned: Mapping[str, float]) -> list[tuple[float, float]]:
    """(queued at, tasks) per cohort, oldest first."""
    found = [(float(key[len(PREFIX) :]), count) for key, count in learned.items() if key.startswith(PREFIX)]
    return sorted(found)


def advance(learned: Mapping[str, float], *, now: float, depth: float, arrivals: float | None) -> dict[str, float]:
    """The state with this tick's queue filed: arrivals at the back, starts taken from the front."""
    queue = cohorts(learned)
    before = sum(count for _, count in queue)
    added = arrivals if arrivals is not None else max(0.0, depth - before)
    started = before + added - depth
    if started < 0:  # more queued than arrived: redelivered tasks, or arrivals the source missed
        added, started = added - started, 0.0
    while started > 1e-9 and queue:
        at, count = queue[0]
        taken = min(count, started)
        started -= taken
        queue = queue[1:] if taken >= count else [(at, count - taken), *queue[1:]]
    added -= started  # what started beyond the queue a tick ago arrived this tick
    if added > 1e-9:
        if queue and (now - queue[-1][0] < MERGE_S or len(queue) >= MAX_COHORTS):
            queue[-1] = (queue[-1][0], queue[-1][1] + added)
        else:
            queue.append((now, added))
    out = {key: value for key, value in learned.items() if not key.startswith(PREFIX)}
    if depth > 0:
        out.update({f"{PREFIX}{at:.3f}": round(count, 4) for at, count in queue if count > 1e-9})
    return out
