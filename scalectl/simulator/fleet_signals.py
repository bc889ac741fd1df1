"""The controller's signal source during a simulation: it reads the fleet model instead of brokers and
vLLM /metrics, and hands the reconciler the same figures production would.

Serving tiers: vLLM's figures (TTFT quantiles over the window, running and waiting requests, KV usage,
request rate). Their ``queue_depth`` is the work asked for and not yet served — requests waiting in vLLM
or at the load balancer — which is what a user-facing tier's own queue holds in production; without it
the min-floor rules could never scale in (an unknown queue holds). Batch tiers: the Celery queue depth
and in-flight tasks. No ready instance: vLLM figures are unknown (None), never zero — except for a serving
tier with the activator (``activator.enabled``, the default): the simulated load balancer holds its
requests as the daemon's activator does, so at zero the policy reads requests running 0 and requests
waiting = those held (docs/routing.md), and a tier at zero wakes on its first request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scalectl.clocks import Clock
from scalectl.policies.types import Signals
from scalectl.simulator.fleet import Fleet
from scalectl.sources.reading import TierReading
from scalectl.sources.spec import SignalsSpec
from scalectl.tiers.config import FleetConfig


def activated_tiers(config: FleetConfig) -> frozenset[str]:
    """Tiers with the activator on: the simulated load balancer stands for the daemon's nginx server block."""
    return frozenset(name for name, tier in config.tiers.items() if tier.activator.enabled)


class FleetSignals:
    def __init__(self, fleet: Fleet, clock: Clock, activated: frozenset[str] = frozenset()) -> None:
        self.fleet = fleet
        self.clock = clock
        self.activated = activated  # serving tiers whose requests wait at an activator while none is ready

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        now = self.clock.now()
        if tier not in self.fleet.models:
            return TierReading(Signals(), now, {"simulator": f"tier {tier!r} has no load in the workload"})
        signals = self.fleet.signals(tier)
        if tier in self.activated and tier in self.fleet.serving and signals.requests_waiting is None:
            held = float(self.fleet.serving[tier].held())
            signals = dataclasses.replace(signals, requests_running=0.0, requests_waiting=held)
        if tier in self.fleet.serving and signals.queue_depth is None and signals.requests_waiting is not None:
            signals = dataclasses.replace(signals, queue_depth=signals.requests_waiting)
        return TierReading(signals, now, sources={"all": "simulator fleet model"})

    async def aclose(self) -> None:
        return None
