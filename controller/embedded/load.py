"""A synthetic load for the embedded demo: a diurnal ramp on the serving tiers and batch bursts on the
batch tier, as a fluid model over the instances the simulated cloud has running.

This is a demo source, not the simulator (which replays requests one by one), but its latencies come from
the same engine model (``scalectl.sizing.engine``) as the simulator and the vLLM stand-in, for the engine the
daemon would launch on each bundled tier's GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scalectl.clocks import Clock
from scalectl.controller.embedded import bundled_tiers_text
from scalectl.policies.prior import admitted_sequences
from scalectl.policies.types import Signals
from scalectl.providers.simulated import SimulatedCloud
from scalectl.sizing.engine import EngineProfile, launched_engine
from scalectl.sources.reading import TierReading
from scalectl.sources.spec import SignalsSpec
from scalectl.tiers.config import parse_config

# A demo session's request: prompt and answer (tokens), and the quantiles of a standard normal the
# client overhead (lognormal) is read at for TTFT p50 / p95 / p99.
PROMPT_TOKENS, OUTPUT_TOKENS, THINK_S = 600.0, 350.0, 0.3
Z = {0.50: 0.0, 0.95: 1.645, 0.99: 2.326}


@dataclass
class _Serving:
    peak_sessions: float  # concurrent user sessions at the top of the day
    slots_per_instance: float  # sessions one instance runs at once (the engine's --max-num-seqs)
    period: float = 3600.0  # one demo "day" lasts an hour of virtual time
    night: float = 0.1  # night load as a share of the peak (business hours vs night: 10×)


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
        bundled = parse_config(bundled_tiers_text(), "bundled example tiers").tiers
        # Each instance runs as many sessions as the engine the daemon launches admits, the figure the
        # policy's capacity prior comes from (policies/prior.py); the peaks, in instances filled to it.
        peaks = {"orchestrator": (4.0, 3600.0), "support-daytime": (2.5, 5400.0)}
        self.serving: dict[str, _Serving] = {}
        for name, (full_instances, period) in peaks.items():
            slots = admitted_sequences(bundled[name].serving, bundled[name].gpu, bundled[name].gpu_count)
            self.serving[name] = _Serving(full_instances * slots, slots, period=period)
        self.batch = {"research": _Batch(burst=200)}
        self.engines = {
            n: launched_engine(bundled[n].serving, bundled[n].gpu, bundled[n].gpu_count) for n in self.serving
        }
        self._last: dict[str, float] = {}
        self._t0: float | None = None  # the demo day starts at night, when the daemon starts

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        now = self.clock.now()
        if self._t0 is None:
            self._t0 = now
        dt = max(0.0, now - self._last.get(tier, now))
        self._last[tier] = now
        running = self.cloud.running_by_tier().get(tier, 0)
        if tier in self.serving:
            signals = self._serve(self.serving[tier], self.engines[tier], now - self._t0, dt, running)
        elif tier in self.batch:
            signals = self._work(self.batch[tier], now, dt, running)
        else:
            signals = Signals()
        return TierReading(signals, now, sources={"*": "synthetic"})

    @staticmethod
    def _serve(s: _Serving, engine: EngineProfile, elapsed: float, dt: float, running: int) -> Signals:
        """Closed-loop sessions: each waits for its answer before asking again, so the queue is the
        sessions the running instances have no slot for; those wait for a slot to free up."""
        phase = (elapsed % s.period) / s.period
        sessions = s.peak_sessions * (s.night + (1 - s.night) * math.sin(math.pi * phase) ** 2)
        slots = running * s.slots_per_instance
        served = min(sessions, slots)
        waiting = max(0.0, sessions - slots)
        ttft = _ttft_quantiles(engine, served / running if running else 0.0)
        if slots and waiting:  # a waiting session starts when one of the served ones finishes its turn
            per_turn = ttft[0.50] + OUTPUT_TOKENS * _decode_step(engine, s.slots_per_instance) + THINK_S
            wait = waiting / (served / per_turn)
            ttft = {q: v + (wait if 1.0 - q < waiting / sessions else 0.0) for q, v in ttft.items()}
        elif not slots:
            ttft = {q: v + 2.0 for q, v in ttft.items()}  # nothing serves: the balancer holds every request
        rate = sessions / 2.5  # one request per ~2.5 s per session (answer + think time)
        return Signals(
            queue_depth=round(waiting, 1),
            in_flight=round(served, 1),
            ttft_p50_s=round(ttft[0.50], 4),
            ttft_p95_s=round(ttft[0.95], 4),
            ttft_p99_s=round(ttft[0.99], 4),
            requests_waiting=round(waiting, 1),
            requests_running=round(served, 1),
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


def _decode_step(engine: EngineProfile, batch: float) -> float:
    return float(engine.decode_step_s(batch, batch * (PROMPT_TOKENS + OUTPUT_TOKENS / 2)))


def _ttft_quantiles(engine: EngineProfile, batch: float) -> dict[float, float]:
    """TTFT of an admitted request at ``batch`` running sequences per instance: half a step to the next step
    boundary, the step its prompt rides in (stretched by the prompt), and the client overhead (HTTP, chat
    template, streaming) at each quantile."""
    kv = batch * (PROMPT_TOKENS + OUTPUT_TOKENS / 2)
    engine_s = 0.5 * _decode_step(engine, batch) + engine.step_s(batch, kv, PROMPT_TOKENS)
    return {q: engine.overhead_median_s * math.exp(z * engine.overhead_sigma) + engine_s for q, z in Z.items()}
