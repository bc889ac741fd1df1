"""The controller's signal source during a simulation: it reads the fleet model instead of brokers and
vLLM /metrics, and hands the reconciler the same figures production would.

Serving tiers: vLLM's figures (TTFT quantiles over the window, running and waiting requests, KV usage,
request rate). Their ``queue_depth`` is the work asked for and not yet served — requests waiting in vLLM
or at the load balancer — which is what a user-facing tier's own queue holds in production; without it
the min-floor rules could never scale in (an unknown queue holds). Batch tiers: the Celery queue depth
and in-flight tasks. No ready instance: vLLM figures are unknown (None), never zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from clocks import Clock
from policies.types import Signals
from simulator.fleet import Fleet
from sources.reading import TierReading
from sources.spec import SignalsSpec


class FleetSignals:
    def __init__(self, fleet: Fleet, clock: Clock) -> None:
        self.fleet = fleet
        self.clock = clock

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        now = self.clock.now()
        if tier not in self.fleet.models:
            return TierReading(Signals(), now, {"simulator": f"tier {tier!r} has no load in the workload"})
        signals = self.fleet.signals(tier)
        if tier in self.fleet.serving and signals.queue_depth is None and signals.requests_waiting is not None:
            signals = dataclasses.replace(signals, queue_depth=signals.requests_waiting)
        return TierReading(signals, now, sources={"all": "simulator fleet model"})

    async def aclose(self) -> None:
        return None
