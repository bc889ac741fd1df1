"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.reconciler.loop import TickReport
from controller.store.repository import Store


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
        self.signal_errors = Counter(
            "scalectl_signal_errors_total", "Signal source errors", ["tier", "source"], registry=self.registry
        )
        self.leader = Gauge(
            "scalectl_leader", "1 while this daemon holds the leader lease, else 0", registry=self.registry
        )
        self.leader_epoch = Gauge(
            "scalectl_leader_epoch", "Epoch of the term this daemon leads (0 when standing by)", registry=self.registry
        )

    def observe_leadership(self, leader: bool, epoch: int | None) -> None:
        self.leader.set(1 if leader else 0)
        self.leader_epoch.set(epoch if leader and epoch is not None else 0)

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
