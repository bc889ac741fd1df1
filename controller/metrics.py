"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state).

Names follow the Prometheus conventions: ``scalectl_`` prefix, base units at the end (``_seconds``,
``_dollars``), ``_total`` on counters. Counters get their label values at start (every known tier and
provider), so the first error is a step ``rate()`` sees rather than a series that appears from nothing.
docs/metrics.md is the reference; tests keep the two in step."""

from __future__ import annotations

import platform
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, disable_created_metrics
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from scalectl.controller.views.capacity import learned_batch, learned_capacity
from scalectl.domain.instance import InstanceState
from scalectl.policies.types import PolicyState

if TYPE_CHECKING:
    from scalectl.controller.store.repository import Store

# Signals the policies read (policies.types.Signals), exported per tier when known; absent when unknown.
SIGNALS = (
    "queue_depth",
    "in_flight",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "requests_waiting",
    "requests_running",
    "kv_cache_usage",
    "request_rate",
    "finish_rate",
    "prompt_tokens_rate",
    "generation_tokens_rate",
)
SIGNAL_METRIC_NAMES = {
    "ttft_p50_s": "ttft_p50_seconds",
    "ttft_p95_s": "ttft_p95_seconds",
    "ttft_p99_s": "ttft_p99_seconds",
    "kv_cache_usage": "kv_cache_usage_ratio",
    "request_rate": "requests_per_second",
    "finish_rate": "finished_per_second",
    "prompt_tokens_rate": "prompt_tokens_per_second",
    "generation_tokens_rate": "generation_tokens_per_second",
}
# The TTFT the policy holds (the quantile its ``ttft_quantile`` names), exported as one more signal so a dashboard
# plots it against ``ttft_max_seconds`` without knowing which quantile a tier chose.
TTFT_HELD = "ttft_held_seconds"
TARGETS = ("queue_per_instance", "ttft_max_seconds", "ttft_quantile", "ttft_p95_max_seconds")
INSTANCE_STATES = tuple(s.value for s in InstanceState if s.is_live)  # the label values of live instances
DECISION_OUTCOMES = ("scale_out", "scale_in", "hold", "hold_unknown_signals")
# Instance and tier events the reconciler records (store `events.kind`), counted as they are written.
EVENT_KINDS = (
    "launched",
    "booted",
    InstanceState.READY.value,  # the transitions into these states are recorded under the state's name
    InstanceState.DRAINING.value,
    "retired",
    "interrupted",
    "interruption-notice",
    "lost",
    "no-capacity",
    "provider-refused",
    "create-failed",
    "create-retry",
    "create-backoff",
    "delete-retry",
    "no-placement",
    "rollout-stopped",
    InstanceState.STOPPED.value,  # seen stopped at the provider
    "resumed",
)
SIGNAL_SOURCES = ("queue", "vllm", "prometheus")  # the `source` label: the kind, never an endpoint address
PROVIDER_OPERATIONS = ("offers", "create", "get", "list", "delete", "stop", "start")
PROVIDER_OUTCOMES = ("ok", "error")
# What became of a request at the activator (serving/activator): handed to an instance, or why not.
ACTIVATOR_OUTCOMES = ("proxied", "full", "timed_out", "client_gone", "upstream_error", "too_large", "standby")
DURATION_BUCKETS = (30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600)  # seconds: a boot takes 2–5 min
BOOT_PHASES = ("provisioning", "bootstrapping")  # Instance.boot_phases
PHASE_BUCKETS = (10, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800)  # seconds: a phase can take seconds


# scalectl_tier_demand_forecast's series -> the capacity view's figure per measure
FORECAST_SERIES = {
    "forecast": "forecast_due",
    "actual": "actual_due",
    "ahead": "forecast_ahead",
    "error_p90": "forecast_error_p90",
}


class DaemonMetrics:
    """Definitions, label initialisation and the one recording call the reconciler makes; what is derived
    from each tick's report and the store lives in controller.metrics_feed."""

    def __init__(self, version: str = "0+unknown") -> None:
        disable_created_metrics()  # no *_created series: they double every counter for nothing we use
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        Info("scalectl_build", "Version of the running daemon", registry=r).info(
            {"version": version, "python_version": platform.python_version()}
        )
        self.desired = Gauge("scalectl_tier_desired_instances", "Desired instances per tier", ["tier"], registry=r)
        self.instances = Gauge(
            "scalectl_tier_instances", "Live instances per tier and state", ["tier", "state"], registry=r
        )
        self.hourly_cost = Gauge(
            "scalectl_tier_hourly_cost_dollars", "What the tier's live instances cost per hour", ["tier"], registry=r
        )
        self.cost_deprecated = Gauge(  # removed in the next release: use scalectl_tier_hourly_cost_dollars
            "scalectl_tier_cost_per_hour_dollars",
            "DEPRECATED, use scalectl_tier_hourly_cost_dollars (same value)",
            ["tier"],
            registry=r,
        )
        self.cost_total = Counter(
            "scalectl_tier_cost_dollars", "Dollars accrued by the tier's live instances", ["tier"], registry=r
        )
        self.budget = Gauge(
            "scalectl_tier_budget_hourly_dollars", "The tier's budget_per_hour cap (absent: none)", ["tier"], registry=r
        )
        self.cost_per_1k = Gauge(
            "scalectl_tier_cost_per_1k_requests_dollars",
            "Dollars per 1,000 requests (tasks, for Celery tiers) over the last hour (absent while unknown)",
            ["tier"],
            registry=r,
        )
        self.fleet_budget = Gauge(
            "scalectl_fleet_budget_hourly_dollars",
            "The fleet-wide budget_per_hour cap across tiers (absent: none)",
            registry=r,
        )
        self.signal = Gauge(
            "scalectl_tier_signal",
            "Signals the last decision used (absent while unknown)",
            ["tier", "signal"],
            registry=r,
        )
        self.signals_unknown = Gauge(
            "scalectl_tier_signals_unknown",
            "1 while the last decision held because a signal was unknown, else 0",
            ["tier"],
            registry=r,
        )
        self.target = Gauge("scalectl_tier_target", "The policy's thresholds per tier", ["tier", "target"], registry=r)
        self.oldest_unready = Gauge(
            "scalectl_tier_oldest_unready_seconds",
            "Age of the oldest instance launched but not yet ready (0: none waiting)",
            ["tier"],
            registry=r,
        )
        self.decisions = Counter(
            "scalectl_decisions", "Policy decisions per tier by outcome", ["tier", "outcome"], registry=r
        )
        self.events = Counter(
            "scalectl_instance_events", "Instance and tier events per tier by kind", ["tier", "kind"], registry=r
        )
        self.interruptions = Counter(
            "scalectl_interruptions", "Spot interruptions (notices and preemptions)", ["tier"], registry=r
        )
        self.budget_cap_hits = Counter(
            "scalectl_budget_cap_hits", "Launches refused by the tier's budget_per_hour", ["tier"], registry=r
        )
        self.launch_to_ready = Histogram(
            "scalectl_launch_to_ready_seconds",
            "From the launch intent to a ready (serving) instance",
            ["tier"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.boot_phase = Histogram(
            "scalectl_boot_phase_seconds",
            "One phase of a boot: provisioning (launch intent to the provider reporting it running), "
            "bootstrapping (running to a serving server; not observed where running means serving)",
            ["tier", "phase"],
            buckets=PHASE_BUCKETS,
            registry=r,
        )
        self.drain_duration = Histogram(
            "scalectl_drain_duration_seconds",
            "From the start of a drain to the instance's end",
            ["tier"],
            buckets=(5, 15, 30, 60, 120, 300, 600, 1200),
            registry=r,
        )
        self.provider_requests = Counter(
            "scalectl_provider_requests",
            "Provider API calls by operation and outcome",
            ["provider", "operation", "outcome"],
            registry=r,
        )
        self.provider_errors = Counter(
            "scalectl_provider_errors", "Provider calls that failed in a tick", ["provider"], registry=r
        )
        self.signal_errors = Counter(
            "scalectl_signal_errors", "Signal source errors by kind of source", ["tier", "source"], registry=r
        )
        self.tick_seconds = Histogram(
            "scalectl_tick_duration_seconds",
            "Reconcile tick duration",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.ticks = Counter("scalectl_ticks", "Reconcile ticks by outcome", ["outcome"], registry=r)
        # deposed: a leader that lost its term mid-tick; standby: a standby's election step that reached the store
        for outcome in ("ok", "error", "deposed", "standby"):
            self.ticks.labels(outcome)
        self.capacity = Gauge(
            "scalectl_tier_capacity_per_instance",
            "What one instance serves at the TTFT target in the tier's first measure (req/s; tasks in flight for a"
            " queue): the prior and what sizing uses (learned from the fleet's TTFT)",
            ["tier", "source"],
            registry=r,
        )
        self.forecast = Gauge(
            "scalectl_tier_demand_forecast",
            "Target mode's demand per measure (its unit per second): `forecast` is what was sized on for now, made a"
            " boot horizon ago, beside the `actual` rate now; `ahead` is the forecast for a horizon from now;"
            " `error_p90` its measured shortfall. Absent until known",
            ["tier", "measure", "series"],
            registry=r,
        )
        self.batch_task = Gauge(
            "scalectl_tier_batch_task_seconds",
            "A max_wait batch tier's learned task time (Little's law); absent until enough tasks finished",
            ["tier"],
            registry=r,
        )
        self.batch_rounds = Gauge(
            "scalectl_tier_batch_rounds",
            "1 where a max_wait batch tier serves a trickle in rounds (workers off between them), else 0",
            ["tier"],
            registry=r,
        )
        self.activator_held = Gauge(
            "scalectl_activator_requests_held",
            "Requests the activator holds for a tier with no ready instance (absent: no activator)",
            ["tier"],
            registry=r,
        )
        self.activator_requests = Counter(
            "scalectl_activator_requests",
            "Requests that reached the activator, by what became of them",
            ["tier", "outcome"],
            registry=r,
        )
        self.activator_hold = Histogram(
            "scalectl_activator_hold_seconds",
            "How long the activator held a request before an instance was ready (or it gave up)",
            ["tier"],
            buckets=(0.1, 1, 5, 15, 30, 60, 120, 180, 300, 600),
            registry=r,
        )
        self.leader = Gauge(
            "scalectl_leader", "1 while this daemon holds the leader (sharded: housekeeping) lease, else 0", registry=r
        )
        self.tiers_held = Gauge(
            "scalectl_tiers_held",
            "Tiers this daemon acts on: all of them while it leads, else 0; sharded, those whose lease it holds",
            registry=r,
        )
        self.leader_epoch = Gauge(
            "scalectl_leader_epoch", "Epoch of the term this daemon leads (0 when standing by)", registry=r
        )

    def init_labels(self, tiers: Iterable[str], providers: Iterable[str]) -> None:
        """Create every counter series of the known tiers and providers at zero (idempotent)."""
        for tier in tiers:
            for outcome in DECISION_OUTCOMES:
                self.decisions.labels(tier, outcome)
            for kind in EVENT_KINDS:
                self.events.labels(tier, kind)
            for counter in (self.interruptions, self.budget_cap_hits, self.cost_total):
                counter.labels(tier)
            for source in SIGNAL_SOURCES:
                self.signal_errors.labels(tier, source)
            for outcome in ACTIVATOR_OUTCOMES:
                self.activator_requests.labels(tier, outcome)
            self.launch_to_ready.labels(tier)
            for phase in BOOT_PHASES:
                self.boot_phase.labels(tier, phase)
            self.drain_duration.labels(tier)
            self.activator_hold.labels(tier)
        for provider in providers:
            self.provider_errors.labels(provider)
            for operation in PROVIDER_OPERATIONS:
                for outcome in PROVIDER_OUTCOMES:
                    self.provider_requests.labels(provider, operation, outcome)

    def record_provider_request(self, provider: str, operation: str, ok: bool) -> None:
        """One provider API call (the reconciler's provider-call wrapper calls this once per call)."""
        self.provider_requests.labels(provider, operation, "ok" if ok else "error").inc()

    def observe_activation(self, tier: str, outcome: str, held: float | None) -> None:
        """One request done at the activator; ``held``: seconds it waited for an instance (None: not held)."""
        self.activator_requests.labels(tier, outcome).inc()
        if held is not None:
            self.activator_hold.labels(tier).observe(held)

    def observe_held(self, held: dict[str, int]) -> None:
        """Requests the activator holds now, per activated tier (tiers no longer activated disappear)."""
        self.activator_held.clear()
        for tier, count in held.items():
            self.activator_held.labels(tier).set(count)

    def observe_capacity(self, store: Store, tiers: Collection[str] | None = None) -> None:
        """Capacity per instance at the TTFT target: the prior and what the policy uses (learned or prior);
        for ``max_wait`` batch tiers, the learned task time and whether they serve a trickle in rounds;
        sharded, of ``tiers`` only (this daemon's)."""
        specs, states = store.config.active_tiers(), store.policy.states()
        for gauge in (self.capacity, self.forecast, self.batch_task, self.batch_rounds):
            gauge.clear()
        for tier, spec in specs.items():
            if tiers is not None and tier not in tiers:
                continue
            state = states.get(tier, (PolicyState(), 0))[0]
            view = learned_capacity(spec, state)
            if view is not None and view["capacity_per_instance"] is not None:  # unknown is absent, never 0
                self.capacity.labels(tier, "prior").set(view["capacity_prior_per_instance"])
                self.capacity.labels(tier, "used").set(view["capacity_per_instance"])
            for measure, figures in (view or {}).get("measures", {}).items():
                for series, key in FORECAST_SERIES.items():
                    if figures[key] is not None:
                        self.forecast.labels(tier, measure, series).set(figures[key])
            batch_view = learned_batch(spec, state)
            if batch_view is not None:
                if batch_view["task_time_s"] is not None:  # unknown is absent, never 0
                    self.batch_task.labels(tier).set(batch_view["task_time_s"])
                self.batch_rounds.labels(tier).set(1 if batch_view["rounds"] else 0)

    def observe_leadership(self, leader: bool, epoch: int | None, tiers: int) -> None:
        self.leader.set(1 if leader else 0)
        self.leader_epoch.set(epoch if leader and epoch is not None else 0)
        self.tiers_held.set(tiers)
