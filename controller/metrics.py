"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.capacity_view import learned_capacity
from controller.reconciler.loop import TickReport
from controller.store.repository import Store
from policies.types import PolicyState


class DaemonMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.desired = Gauge(
            "scalectl_tier_desired_instances", "Desired instances per tier", ["tier"], registry=self.registry
        )
        self.instances = Gauge(
            "scalectl_tier_instances", "Instances per tier and state", ["tier", "state"], registry=self.registry
        )
        self.cost = Gauge(
            "scalectl_tier_cost_per_hour_dollars", "Hourly cost of live instances", ["tier"], registry=self.registry
        )
        self.tick_seconds = Histogram(
            "scalectl_tick_duration_seconds",
            "Reconcile tick duration",
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.ticks = Counter("scalectl_ticks_total", "Reconcile ticks", ["outcome"], registry=self.registry)
        self.provider_errors = Counter(
            "scalectl_provider_errors_total",
            "Provider calls that failed in a tick",
            ["provider"],
            registry=self.registry,
        )
        self.capacity = Gauge(
            "scalectl_tier_capacity_per_instance",
            "Requests in flight one instance serves at the TTFT target (prior, refined from the fleet's TTFT)",
            ["tier", "source"],
            registry=self.registry,
        )
        self.signal_errors = Counter(
            "scalectl_signal_errors_total", "Signal source errors", ["tier", "source"], registry=self.registry
        )

    def observe_tick(self, report: TickReport, store: Store, seconds: float) -> None:
        self.tick_seconds.observe(seconds)
        self.ticks.labels("ok").inc()
        for name, tick in report.tiers.items():
            self.desired.labels(name).set(tick.desired)
            for source in tick.errors:
                self.signal_errors.labels(name, source).inc()
        for provider in report.provider_errors:
            self.provider_errors.labels(provider).inc()
        counts: dict[tuple[str, str], int] = {}
        cost: dict[str, float] = {}
        for row in store.instances(limit=1_000_000):
            counts[(row.tier, row.state)] = counts.get((row.tier, row.state), 0) + 1
            cost[row.tier] = cost.get(row.tier, 0.0) + row.price_per_hour
        self.instances.clear()
        for (tier, state), n in counts.items():
            self.instances.labels(tier, state).set(n)
        self.cost.clear()
        for tier, dollars in cost.items():
            self.cost.labels(tier).set(dollars)
        self._observe_capacity(store)

    def _observe_capacity(self, store: Store) -> None:
        specs, states = store.active_tiers(), store.policy_states()
        self.capacity.clear()
        for tier, spec in specs.items():
            view = learned_capacity(spec, states.get(tier, (PolicyState(), 0))[0])
            if view is not None:
                self.capacity.labels(tier, "prior").set(view["prior"])
                self.capacity.labels(tier, "used").set(view["capacity_per_instance"])
