"""What the simulated cloud does to the fleet over time: spot interruptions (at a rate that storms can
raise) with their notice, and capacity shortages that start and end.

Times here are seconds after the simulation start. Each spot instance's preemption time is drawn once,
when the run first sees it, from the interruption rate over the instance's future (a piecewise-constant
hazard: the base rate, replaced by a storm's rate inside its window); the notice goes out ``notice``
before it, through the cloud's own ``interrupt`` call, so the controller sees exactly what a provider
would show it.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalectl.providers.base import Capacity
from scalectl.providers.errors import InstanceNotFound
from scalectl.providers.simulated import SimulatedCloud
from scalectl.simulator.workloads.spec import CloudSpec

NO_LIMIT = 10_000  # the simulated cloud's default machines per offer


@dataclass(frozen=True, slots=True)
class RateSegment:
    start: float
    end: float  # math.inf for the last
    per_hour: float


def rate_segments(spec: CloudSpec) -> list[RateSegment]:
    """The interruption rate over time: storms (the highest where they overlap) over the base rate."""
    edges = sorted({0.0, *(s.from_ for s in spec.storms), *(s.until for s in spec.storms)})
    segments: list[RateSegment] = []
    for lo, hi in zip(edges, [*edges[1:], math.inf], strict=True):
        rates = [s.spot_interruptions_per_hour for s in spec.storms if s.from_ <= lo < s.until]
        rate = max(rates) if rates else spec.spot_interruptions_per_hour
        if segments and segments[-1].per_hour == rate:
            segments[-1] = RateSegment(segments[-1].start, hi, rate)
        else:
            segments.append(RateSegment(lo, hi, rate))
    return segments


def preemption_time(segments: list[RateSegment], since: float, exposure: float) -> float | None:
    """When an instance alive from ``since`` is preempted, given ``exposure`` ~ Exp(1): the time at which
    the integrated rate reaches it. None: never (the rate runs out)."""
    left = exposure
    for seg in segments:
        if seg.end <= since:
            continue
        lo = max(seg.start, since)
        rate = seg.per_hour / 3600.0
        if rate > 0:
            span = seg.end - lo
            if left <= rate * span:
                return lo + left / rate
            left -= rate * span
    return None


@dataclass(frozen=True, slots=True)
class _CapacityChange:
    at: float
    gpu: str
    capacity: Capacity
    limit: int


class CloudEvents:
    """Applies the ``cloud:`` section to the run's clouds as virtual time passes."""

    def __init__(self, spec: CloudSpec, clouds: Mapping[str, SimulatedCloud], seed: int) -> None:
        self.spec = spec
        self.clouds = dict(clouds)
        self.segments = rate_segments(spec)
        self.spot_possible = any(s.per_hour > 0 for s in self.segments)
        self._rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:spot".encode()).digest()[:8], "big"))
        self._seen: set[tuple[str, str]] = set()
        self._due: list[tuple[float, float, str, str]] = []  # heap of (notice at, preempt at, provider, id)
        self._changes: list[_CapacityChange] = []
        for gpu, window in spec.capacity_windows():
            for kind, limit in ((Capacity.SPOT, window.spot), (Capacity.ON_DEMAND, window.on_demand)):
                if limit is None:
                    continue
                self._changes.append(_CapacityChange(window.from_, gpu, kind, limit))
                if window.until is not None:
                    self._changes.append(_CapacityChange(window.until, gpu, kind, NO_LIMIT))
        self._changes.sort(key=lambda c: c.at)
        self.interruptions_scheduled = 0

    def watch(self, provider: str, provider_id: str, capacity: str, created: float) -> None:
        """A live instance the run knows of; spot ones get their preemption time (once)."""
        if not self.spot_possible or capacity != Capacity.SPOT.value or (provider, provider_id) in self._seen:
            return
        self._seen.add((provider, provider_id))
        at = preemption_time(self.segments, created, float(self._rng.exponential(1.0)))
        if at is None:
            return
        notice_at = max(created, at - self.spec.notice)
        heapq.heappush(self._due, (notice_at, at, provider, provider_id))
        self.interruptions_scheduled += 1

    def apply(self, now: float) -> None:
        """Everything due by ``now``: capacity windows open or close; notices go out (or preemptions land)."""
        while self._changes and self._changes[0].at <= now:
            change = self._changes.pop(0)
            for cloud in self.clouds.values():
                cloud.set_capacity(change.gpu, change.limit, capacity=change.capacity)
        while self._due and self._due[0][0] <= now:
            _, at, provider, provider_id = heapq.heappop(self._due)
            notice = at - now
            try:
                self.clouds[provider].interrupt(provider_id, notice=notice if notice > 0 else None)
            except InstanceNotFound:
                continue  # retired before its time came
