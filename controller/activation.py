"""The activator in the daemon: which tiers it activates, and the demand it holds as a signal.

A tier is activated when the daemon routes it through a generated nginx server block (``SCALECTL_ROUTING``
is nginx and the tier has a ``SCALECTL_ROUTING_LISTEN`` address) and its ``activator.enabled`` is true.
Only then do its requests reach the activator while it has no ready instance, so only then does "nothing
held" mean "no demand": for such a tier with no instance serving, the reading's unknown vLLM figures
become known — requests running 0, requests waiting = what the activator holds (plus the tier's Celery
queue, if it has one; an unreadable queue leaves the load unknown) — and the arrival rate is what reached
the activator since the last reading. A tier with instances serving reads vLLM as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scalectl.clocks import Clock
from scalectl.controller.reconciler.record import ACTIVATOR  # the source name decisions record
from scalectl.controller.settings import Settings
from scalectl.serving.activator import Activator, HoldLimits
from scalectl.sources.reading import SignalSource, TierReading
from scalectl.sources.spec import SignalsSpec
from scalectl.tiers.config import FleetConfig, TierSpec


def activated(settings: Settings, name: str, tier: TierSpec) -> bool:
    """The load balancer sends this tier's requests to the activator while it has no ready instance."""
    return settings.routing != "none" and name in settings.routing_listen and tier.activator.enabled


def hold_limits(tier: TierSpec) -> HoldLimits:
    spec = tier.activator
    return HoldLimits(max_held=spec.max_held, max_wait_s=spec.max_wait, max_body_bytes=spec.max_body_bytes)


def sync_gates(activator: Activator, settings: Settings, fleet: FleetConfig) -> None:
    """Gates for the activated tiers (limits follow `scalectl apply`); the others' gates close."""
    wanted = {name: tier for name, tier in fleet.tiers.items() if activated(settings, name, tier)}
    for name in activator.tiers():
        if name not in wanted:
            activator.remove(name)
    for name, tier in wanted.items():
        activator.configure(name, hold_limits(tier))


class ActivatedSignals:
    """A ``SignalSource`` that adds the activator's held requests to the readings of activated tiers."""

    def __init__(self, inner: SignalSource, activator: Activator, clock: Clock):
        self._inner = inner
        self._activator = activator
        self._clock = clock
        self._last_read: dict[str, float] = {}

    def __getattr__(self, name: str) -> object:  # error_counts, details, … of the wrapped reader
        return getattr(self._inner, name)

    async def read(self, tier: str, spec: SignalsSpec, endpoints: Sequence[str]) -> TierReading:
        reading = await self._inner.read(tier, spec, endpoints)
        held = self._activator.held(tier)
        arrivals = self._activator.take_arrivals(tier)
        if held is None or arrivals is None:
            self._last_read.pop(tier, None)
            return reading
        now = self._clock.now()
        since = self._last_read.get(tier)
        self._last_read[tier] = now
        if endpoints:
            return reading  # instances serve: vLLM's own figures count these requests
        signals = reading.signals
        if spec.queue is not None and signals.queue_depth is None:
            return reading  # a queue the load counts could not be read: the load stays unknown
        # Waiting: what the activator holds, plus the tier's own queue in front of vLLM (policies/load.py).
        waiting = (signals.requests_waiting or signals.queue_depth or 0.0) + held
        running = signals.requests_running if signals.requests_running is not None else 0.0
        rate = arrivals / (now - since) if since is not None and now > since else signals.request_rate
        merged = replace(
            signals,
            requests_running=running,
            requests_waiting=waiting,
            arrivals=float(arrivals) if signals.arrivals is None else signals.arrivals + arrivals,
            request_rate=rate,
        )
        figures = ("requests_running", "requests_waiting", "arrivals", "request_rate")
        sources = {**reading.sources, **{figure: ACTIVATOR for figure in figures}}
        return replace(reading, signals=merged, sources=sources)

    async def aclose(self) -> None:
        await self._inner.aclose()
