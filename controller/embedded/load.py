"""A synthetic load for the embedded demo: a diurnal ramp on the serving tiers and batch bursts on the
batch tier, as a fluid model over the instances the simulated cloud has running.

This is a demo source, not the simulator (which replays traces through a calibrated instance model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from clocks import Clock
from controller.signals.reading import TierReading
from controller.signals.spec import SignalsSpec
from policies.types import Signals
from providers.simulated import SimulatedCloud


@dataclass
class _Serving:
    peak_rps: float  # requests per second at the top of the day
    per_instance_rps: float  # what one instance serves at the latency target
    period: float = 3600.0  # one demo "day" lasts an hour of virtual time
    queue: float = 0.0


@dataclass
class _Batch:
    burst: int = 400  # tasks that land at once
    every: float = 1800.0  # seconds between bursts
    per_instance: int = 8  # tasks one instance runs at a time
    task_seconds: float = 60.0
    queue: float = 0.0
    in_flight: float = 0.0
    next_burst: float | None = None
    running: list[tuple[float, float]] = field(default_factory=list)  # (done at, count)


class SyntheticLoad:
    """SignalSource for the demo tiers. Unknown tiers get unknown signals (the policy holds)."""

    def __init__(self, clock: Clock, cloud: SimulatedCloud):
        self.clock = clock
        self.cloud = cloud
        self.serving = {
            "orchestrator": _Serving(peak_rps=90.0, per_instance_rps=12.0),
            "support-daytime": _Serving(peak_rps=50.0, per_instance_rps=12.0, period=5400.0),
        }
        self.batch = {"research": _Batch()}
        self._last: dict[str, float] = {}

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        now = self.clock.now()
        dt = max(0.0, now - self._last.get(tier, now))
        self._last[tier] = now
        running = self.cloud.running_by_tier().get(tier, 0)
        if tier in self.serving:
            signals = self._serve(self.serving[tier], now, dt, running)
        elif tier in self.batch:
            signals = self._work(self.batch[tier], now, dt, running)
        else:
            signals = Signals()
        return TierReading(signals, now, sources={"*": "synthetic"})

    @staticmethod
    def _serve(s: _Serving, now: float, dt: float, running: int) -> Signals:
        phase = (now % s.period) / s.period
        rate = s.peak_rps * (0.1 + 0.9 * max(0.0, math.sin(math.pi * phase)) ** 2)  # night 10×below peak
        capacity = running * s.per_instance_rps
        s.queue = max(0.0, s.queue + (rate - capacity) * dt)
        utilisation = rate / capacity if capacity else math.inf
        wait = s.queue / capacity if capacity else 30.0
        ttft = 0.08 + 0.25 * min(utilisation, 4.0) ** 3 / 4 + wait
        return Signals(
            queue_depth=round(s.queue + max(0.0, rate - capacity) * 1.0, 2),
            in_flight=round(min(rate, capacity) * 2.0, 2),
            ttft_p50_s=round(ttft * 0.45, 4),
            ttft_p95_s=round(ttft, 4),
            ttft_p99_s=round(ttft * 1.6, 4),
            request_rate=round(rate, 3),
            arrivals=round(rate * dt, 1),
        )

    @staticmethod
    def _work(b: _Batch, now: float, dt: float, running: int) -> Signals:
        if b.next_burst is None:
            b.next_burst = now + 120.0
        if now >= b.next_burst:
            b.queue += b.burst
            b.next_burst = now + b.every
        b.running = [(t, n) for t, n in b.running if t > now]
        b.in_flight = sum(n for _, n in b.running)
        free = max(0.0, running * b.per_instance - b.in_flight)
        start = min(free, b.queue)
        if start > 0:
            b.queue -= start
            b.running.append((now + b.task_seconds, start))
            b.in_flight += start
        return Signals(queue_depth=round(b.queue), in_flight=round(b.in_flight))

    async def aclose(self) -> None:
        return None
