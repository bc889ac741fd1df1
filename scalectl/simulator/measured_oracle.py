"""The oracle's fleet for open-loop traffic (Poisson, traces), found on the fleet model itself.

Every minute gets the fewest instances (instant, no boot, as the oracle's always are) with which the
requests sent in that minute meet the TTFT target at the SLO goal. Each is followed until it has its first
token or the target has passed. Each minute is run again from the same starting state with other fleet
sizes, galloping from a rate sizing (scaled by how the last measured minute compared with it) and then
bisecting.

Why: a rate sizing replayed on the same model can be far off. Each minute's busiest 10 seconds sized as
Poisson met 88.3% (Azure code) and 89.6% (Azure conversation) of a 500 ms target, not the 99.5% the oracle
stands for: those bursts last under a second. Near what client overhead allows (a 400 ms target) a
load-tested instance has almost no capacity, and the sizing asked for 9x the instances a fleet needs. A
ratio to such an oracle says nothing.

Some misses no fleet size fixes (a long prompt, a slow client): when the minute cannot meet the goal even
with many more instances, its goal is what such a fleet meets, less ``SLACK``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scalectl.simulator.requests import Requests
from scalectl.simulator.serving_pool import OpenSource, PoolCheckpoint, ServingPool
from scalectl.sizing.engine import EngineProfile

SLACK = 0.001  # a minute no fleet holds at the goal: within this share of what a much larger fleet meets
BIG = 4  # that larger fleet: this many times the search's starting size (at least 8 instances)


@dataclass(frozen=True, slots=True)
class MinuteOutcome:
    met: int
    judged: int

    def share(self) -> float:
        return self.met / self.judged if self.judged else 1.0


class _Minutes:
    """One pool replaying the traffic minute by minute with whatever fleet size is asked."""

    def __init__(self, profile: EngineProfile, source: OpenSource, target_s: float, tick_s: float) -> None:
        self.pool = ServingPool(profile)
        self.source, self.target, self.tick = source, target_s, tick_s
        self.ids: list[str] = []
        self._drawn: dict[tuple[float, float], Requests] = {}  # this minute's arrivals, for every try

    def arrivals(self, t0: float, t1: float) -> Requests:
        key = (t0, t1)
        if key not in self._drawn:
            self._drawn[key] = self.source.arrivals(t0, t1)
        return self._drawn[key]

    def next_minute(self) -> None:
        self._drawn.clear()

    def run(self, n: int, t0: float, t1: float) -> tuple[MinuteOutcome, PoolCheckpoint]:
        """Serve [t0, t1) with ``n`` ready instances (the others drain what they still run); the outcome of
        the requests sent in it, and the state at ``t1``.

        The same fleet serves on until every one of them has its first token or has waited past the target
        (a burst in the minute's last second is the minute's, not the next one's)."""
        while len(self.ids) < n:
            self.ids.append(f"oracle-{len(self.ids)}")
        pool = self.pool
        pool.set_instances(self.ids[:n], self.ids[n:], t0)
        recorded = len(pool.record.ttft)
        self._advance(t0, t1)
        at_end = pool.checkpoint()
        self._advance(t1, t1 + self.target)  # sent by t1 and still waiting then: past the target
        ttft = np.concatenate(pool.record.ttft[recorded:]) if len(pool.record.ttft) > recorded else np.empty(0)
        sent = np.concatenate(pool.record.ttft_origin[recorded:]) if ttft.shape[0] else np.empty(0)
        mine = (sent >= t0) & (sent < t1)
        waiting = pool.awaiting_first_token()
        still = int(((waiting >= t0) & (waiting < t1)).sum())  # waited past the target by now: misses
        return MinuteOutcome(int((ttft[mine] <= self.target).sum()), int(mine.sum()) + still), at_end

    def _advance(self, t0: float, t1: float) -> None:
        t = t0
        while t < t1 - 1e-9:
            end = min(t + self.tick, t1)
            self.pool.advance(t, end, self)
            t = end


def measured_need(
    profile: EngineProfile,
    source: OpenSource,
    target_s: float,
    grid: np.ndarray,
    duration_s: float,
    guess: np.ndarray,
    slo_goal: float,
    tick_s: float = 5.0,
) -> tuple[np.ndarray, MinuteOutcome]:
    """Per minute of ``grid`` (its start times, one step apart), the fewest instant instances with which
    the minute meets ``slo_goal``, and the requests that fleet met and judged over the run (below the goal
    where some minutes no fleet size holds). ``guess`` is a rate-based sizing per minute: its changes from
    minute to minute start each search, scaled by how the last measured minute compared with it (a rate
    sizing can be off by a large factor, as with bursts it cannot see or a target near what client overhead
    allows, but it rises and falls with the load)."""
    minutes = _Minutes(profile, source, target_s, tick_s)
    need = np.zeros(grid.shape[0])
    step = float(grid[1] - grid[0]) if grid.shape[0] > 1 else duration_s
    ratio = 1.0  # measured ÷ guessed, from the last minute that had both
    met = judged = 0
    for m, t0 in enumerate(grid.tolist()):
        t1 = min(t0 + step, duration_s)
        start = max(0, round(float(guess[m]) * ratio))
        size, outcome = _fewest(minutes, t0, t1, start, slo_goal)
        met, judged = met + outcome.met, judged + outcome.judged
        minutes.next_minute()
        if guess[m] > 0 and size > 0:
            ratio = size / float(guess[m])
        need[m] = size
    return need, MinuteOutcome(met, judged)


def _fewest(minutes: _Minutes, t0: float, t1: float, start: int, goal: float) -> tuple[int, MinuteOutcome]:
    """The fewest instances that meet ``goal`` on [t0, t1), searched from ``start``, and the minute's
    outcome with them; the pool is left as that fleet left it."""
    before = minutes.pool.checkpoint()
    after: dict[int, tuple[MinuteOutcome, PoolCheckpoint]] = {}

    def share(n: int) -> float:
        minutes.pool.restore(before)
        after[n] = minutes.run(n, t0, t1)
        return after[n][0].share()

    ceiling = max(BIG * start, 8)  # a minute after a lull starts at 0: a burst may still need several
    found = _search(lambda n: share(n) >= goal, start, ceiling)
    if found is None:  # not even a much larger fleet meets it: the minute's goal is what that fleet meets
        bar = share(ceiling) - SLACK
        found = _search(lambda n: share(n) >= bar, start, ceiling)
        assert found is not None  # the ceiling meets its own share less the slack
    outcome, state = after[found]  # every size a search returns was tried
    minutes.pool.restore(state)
    return found, outcome


def _search(meets: Callable[[int], bool], start: int, ceiling: int) -> int | None:
    """The least n in [0, ceiling] for which ``meets(n)`` (taken to be monotone), galloping from ``start``
    (near the answer: most minutes need two tries) and then bisecting; None when not even ``ceiling``
    meets."""
    if meets(start):
        ok, low, step = start, -1, 1
        while ok > 0:
            trial = max(0, ok - step)
            if not meets(trial):
                low = trial
                break
            ok, step = trial, step * 2
    else:
        low, step = start, 1
        while True:
            trial = min(low + step, ceiling)
            if meets(trial):
                ok = trial
                break
            if trial >= ceiling:
                return None
            low, step = trial, step * 2
    while ok - low > 1:
        mid = (low + ok) // 2
        if meets(mid):
            ok = mid
        else:
            low = mid
    return ok
