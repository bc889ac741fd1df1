"""The peers' scaling rules, as their users configure them: KEDA/HPA and SkyServe's request-rate autoscaler.

Both are pure deciders: ``decide(tier, now, signals, current) -> desired``, called every poll by the
baseline driver (``scalectl.simulator.baselines.run_counts``). ``current`` counts ready and provisioning instances,
as HPA's ``spec.replicas`` and SkyServe's launched replicas do.

* ``Hpa`` — Kubernetes HPA fed by KEDA's Prometheus scaler, ``metricType: AverageValue``. The metric is what a
  KEDA user scales vLLM on: ``sum(vllm:num_requests_running)`` (batch: RabbitMQ queue length, ready + unacked).
  Every sync: ``ratio = metric / (target × current)``; within ±tolerance (10%) nothing moves, else
  ``desired = ceil(metric / target)``; scale-up is limited per sync to max(+100%, +4 pods) (HPA's default
  ``behavior``); scale-down goes only to the highest recommendation of the stabilisation window (300 s).
  No reading (no replica serving): hold. Bounded by the tier's min and max.
* ``SkyServe`` — SkyServe's ``RequestRateAutoscaler``: every decision interval (20 s),
  ``target = ceil(requests in the last 60 s / 60 / target_qps_per_replica)`` clipped to [min, max]; the
  fleet's target moves up only after ``upscale_delay / interval`` consecutive decisions that want more
  (300 s → 15), down only after ``downscale_delay / interval`` consecutive decisions that want fewer
  (1200 s → 60); a decision that wants the same resets both counters; a target of 0 moves at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from scalectl.policies.types import Signals


@dataclass(frozen=True, slots=True)
class HpaTier:
    target: float  # metric per replica (AverageValue)
    min_replicas: int
    max_replicas: int
    batch: bool = False


class Hpa:
    """KEDA + HPA (autoscaling/v2 defaults): tolerance, scale-up rate limit, scale-down stabilisation."""

    def __init__(self, tiers: Mapping[str, HpaTier], *, tolerance: float = 0.1, stabilization_s: float = 300.0):
        self.tiers = dict(tiers)
        self.tolerance = tolerance
        self.stabilization_s = stabilization_s
        self._recommendations: dict[str, deque[tuple[float, int]]] = {name: deque() for name in tiers}

    def metric(self, tier: str, signals: Signals) -> float | None:
        """What the KEDA scaler reads: running requests (serving) or queue + unacked tasks (batch)."""
        if self.tiers[tier].batch:
            if signals.queue_depth is None:
                return None
            return signals.queue_depth + (signals.in_flight or 0.0)
        return signals.requests_running

    def __call__(self, tier: str, now: float, signals: Signals, current: int) -> int:
        spec = self.tiers[tier]
        metric = self.metric(tier, signals)
        if metric is None:  # the external metric is unavailable: HPA does not scale
            raw = current
        elif current == 0:  # KEDA activates a scaled-to-zero target at one replica; HPA takes over from there
            raw = 1 if metric > 0 else 0
        elif abs(metric / (spec.target * current) - 1.0) <= self.tolerance:
            raw = current
        else:
            raw = math.ceil(metric / spec.target)
        raw = max(spec.min_replicas, min(spec.max_replicas, raw))
        window = self._recommendations[tier]
        window.append((now, raw))
        while window and window[0][0] <= now - self.stabilization_s:
            window.popleft()
        if raw >= current:  # default scale-up policy: at most +100% or +4 pods per 15 s, whichever is more
            return min(raw, max(2 * current, current + 4))
        return min(current, max(r for _, r in window))


@dataclass(frozen=True, slots=True)
class SkyServeTier:
    target_qps_per_replica: float
    min_replicas: int
    max_replicas: int


@dataclass(slots=True)
class _SkyServeState:
    target: int
    up: int = 0
    down: int = 0


class SkyServe:
    """SkyServe's RequestRateAutoscaler: a 60 s request-rate window and consecutive-decision hysteresis."""

    def __init__(
        self,
        tiers: Mapping[str, SkyServeTier],
        *,
        decision_interval_s: float = 20.0,
        upscale_delay_s: float = 300.0,
        downscale_delay_s: float = 1200.0,
    ) -> None:
        self.tiers = dict(tiers)
        self.up_periods = int(upscale_delay_s / decision_interval_s)
        self.down_periods = int(downscale_delay_s / decision_interval_s)
        self._state = {name: _SkyServeState(spec.min_replicas) for name, spec in self.tiers.items()}

    def wanted(self, tier: str, qps: float) -> int:
        spec = self.tiers[tier]
        return max(spec.min_replicas, min(spec.max_replicas, math.ceil(qps / spec.target_qps_per_replica)))

    def __call__(self, tier: str, now: float, signals: Signals, current: int) -> int:
        state = self._state[tier]
        if signals.request_rate is None:  # the load balancer always counts; unknown only without a tier
            return state.target
        wanted = self.wanted(tier, signals.request_rate)
        if state.target == 0:
            state.target = wanted
        elif wanted > state.target:
            state.up, state.down = state.up + 1, 0
            if state.up >= self.up_periods:
                state.up, state.target = 0, wanted
        elif wanted < state.target:
            state.down, state.up = state.down + 1, 0
            if state.down >= self.down_periods:
                state.down, state.target = 0, wanted
        else:
            state.up = state.down = 0
        return state.target
