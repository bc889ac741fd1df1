"""Feeds DaemonMetrics after every tick: what the tick report says (decisions, signals), what the store
holds (instances, cost), and the events written since the previous tick (launch-to-ready and drain
durations, interruptions, budget refusals). Reading events keeps the metrics out of the reconciler."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Collection, Mapping
from typing import Any

from sqlalchemy import func, select

from scalectl.controller.metrics import INSTANCE_STATES, SIGNAL_METRIC_NAMES, SIGNALS, TTFT_HELD, DaemonMetrics
from scalectl.controller.reconciler.loop import TickReport
from scalectl.controller.store.instances import to_entity
from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.controller.views.status import fleet_status
from scalectl.domain.instance import InstanceState
from scalectl.tiers.config import TierSpec

READY_STATES = (InstanceState.READY, InstanceState.DRAINING)  # serving (a draining one still answers)
INTERRUPTION_KINDS = ("interrupted", "interruption-notice")
ENDING_KINDS = ("retired", "ended")  # a drain that completed (a preemption cuts one short)
UNIT_COST_EVERY = 60.0  # seconds between cost-per-1,000-requests refreshes
_REMEMBERED = 10_000  # interrupted instance keys kept to count each instance once


def decision_outcome(current: int, desired: int, reason: str) -> str:
    if desired > current:
        return "scale_out"
    if desired < current:
        return "scale_in"
    # The policies say "<signal> unknown (no scale-in on missing data)" when they hold on missing data.
    return "hold_unknown_signals" if "unknown" in reason else "hold"


def policy_targets(spec: TierSpec) -> dict[str, float]:
    """The thresholds a tier's policy compares its signals with (the reactive rules of a predictive one)."""
    rules: Any = getattr(spec.policy, "reactive", None) or spec.policy
    ttft_max = _either(rules, spec.policy, "ttft_max", "ttft_p95_max")
    found = {
        "queue_per_instance": getattr(rules, "queue_per_instance", None),
        "ttft_max_seconds": ttft_max,
        "ttft_quantile": _either(rules, spec.policy, "ttft_quantile") if ttft_max is not None else None,
        "ttft_p95_max_seconds": ttft_max,  # the name before ttft_max; kept one release for existing dashboards
    }
    return {name: float(v) for name, v in found.items() if v is not None}


def _either(rules: Any, policy: Any, *names: str) -> Any:
    """The first of ``names`` set on the reactive rules or on the policy itself (None: none is)."""
    for source in (rules, policy):
        for name in names:
            value = getattr(source, name, None)
            if value is not None:
                return value
    return None


def held_ttft(spec: TierSpec | None, values: Mapping[str, float | None]) -> float | None:
    """The TTFT at the quantile the tier's policy holds (p99 unless ``ttft_quantile`` says otherwise)."""
    quantile = _either(getattr(spec.policy, "reactive", None), spec.policy, "ttft_quantile") if spec else None
    key = {0.95: "ttft_p95_s", 0.99: "ttft_p99_s"}.get(float(quantile or 0.99), "ttft_p99_s")  # TTFT_QUANTILES
    return values.get(key)


class MetricsFeed:
    def __init__(self, metrics: DaemonMetrics):
        self.m = metrics
        self._last_event_id: int | None = None
        self._last_t: float | None = None
        self._tiers: set[str] = set()
        self._interrupted: OrderedDict[str, None] = OrderedDict()
        self._unit_costs_at = float("-inf")
        self._only: set[str] | None = None  # sharded: the tiers this daemon reports

    def observe(
        self,
        report: TickReport,
        store: Store,
        tiers: Mapping[str, TierSpec],
        providers: list[str],
        seconds: float,
        *,
        owned: Collection[str] | None = None,
    ) -> None:
        """``owned``: sharded, the tiers this daemon acts on — each tier's series come from that one daemon,
        so summing a metric over the daemons counts every tier once."""
        m = self.m
        m.tick_seconds.observe(seconds)
        m.ticks.labels("ok").inc()
        self._only = None if owned is None else set(owned)
        self._known(tiers if owned is None else {n: t for n, t in tiers.items() if n in owned}, providers)
        for name, tick in report.tiers.items():
            m.desired.labels(name).set(tick.desired)
            m.decisions.labels(name, decision_outcome(tick.current, tick.desired, tick.reason)).inc()
            m.signals_unknown.labels(name).set(1 if "unknown" in tick.reason else 0)
            values = tick.signals.to_dict()
            for signal in SIGNALS:
                label = SIGNAL_METRIC_NAMES.get(signal, signal)
                if values.get(signal) is None:  # unknown is absent, never zero
                    _remove(m.signal, name, label)
                else:
                    m.signal.labels(name, label).set(float(values[signal]))  # type: ignore[arg-type]
            held = held_ttft(tiers.get(name), values)
            if held is None:
                _remove(m.signal, name, TTFT_HELD)
            else:
                m.signal.labels(name, TTFT_HELD).set(held)
            for source in tick.errors:  # "vllm 10.0.0.7:8000" -> "vllm": instances come and go, labels must not
                m.signal_errors.labels(name, source.split(" ", 1)[0]).inc()
        for provider in report.provider_errors:
            m.provider_errors.labels(provider).inc()
        fleet = store.config.fleet_config()
        if fleet is not None and fleet.budget_per_hour is not None:
            m.fleet_budget.set(fleet.budget_per_hour)
        else:
            m.fleet_budget.set(float("nan"))  # no cap: NaN rather than a zero that reads as "spend nothing"
        self._instances(report.t, store)
        self._unit_costs(report.t, store)
        self._events(store)
        m.observe_capacity(store, self._only)
        self._last_t = report.t

    def _known(self, tiers: Mapping[str, TierSpec], providers: list[str]) -> None:
        m = self.m
        m.init_labels(tiers, providers)
        for gone in self._tiers - set(tiers):
            per_tier = (m.desired, m.hourly_cost, m.cost_deprecated, m.budget, m.signals_unknown, m.oldest_unready)
            for gauge in (*per_tier, m.cost_per_1k):
                _remove(gauge, gone)
            for state in INSTANCE_STATES:
                _remove(m.instances, gone, state)
        self._tiers = set(tiers)
        for name, spec in tiers.items():
            if spec.budget_per_hour is None:
                _remove(m.budget, name)
            else:
                m.budget.labels(name).set(spec.budget_per_hour)
            for target, value in policy_targets(spec).items():
                m.target.labels(name, target).set(value)

    def _unit_costs(self, now: float, store: Store) -> None:
        """Cost per 1,000 requests, refreshed once a minute (it reads an hour of rows)."""
        if now - self._unit_costs_at < UNIT_COST_EVERY:
            return
        self._unit_costs_at = now
        for row in fleet_status(store.reads, now):
            if self._only is not None and row["tier"] not in self._only:  # another daemon's
                continue
            if row["cost_per_1k_requests"] is None:  # unknown is absent, never zero
                _remove(self.m.cost_per_1k, row["tier"])
            else:
                self.m.cost_per_1k.labels(row["tier"]).set(row["cost_per_1k_requests"])

    def _instances(self, now: float, store: Store) -> None:
        m = self.m
        counts = {(t, s): 0 for t in self._tiers for s in INSTANCE_STATES}
        hourly = dict.fromkeys(self._tiers, 0.0)
        oldest = dict.fromkeys(self._tiers, 0.0)
        for tier, state, n, spend, first_created in store.reads.live_by_state(self._only):
            counts[(tier, state)] = counts.get((tier, state), 0) + n
            hourly[tier] = hourly.get(tier, 0.0) + spend
            if state not in READY_STATES:
                oldest[tier] = max(oldest.get(tier, 0.0), now - first_created)
        for (tier, state), n in counts.items():
            m.instances.labels(tier, state).set(n)
        elapsed = 0.0 if self._last_t is None else max(0.0, now - self._last_t)
        for tier, dollars in hourly.items():
            m.hourly_cost.labels(tier).set(dollars)
            m.cost_deprecated.labels(tier).set(dollars)
            m.cost_total.labels(tier).inc(dollars * elapsed / 3600)
        for tier, age in oldest.items():
            m.oldest_unready.labels(tier).set(age)

    def _events(self, store: Store) -> None:
        with store.sessions() as s:
            if self._last_event_id is None:  # a (re)started daemon counts from here, not the whole history
                self._last_event_id = s.scalar(select(func.max(EventRecord.id))) or 0
                return
            events = list(s.scalars(select(EventRecord).where(EventRecord.id > self._last_event_id)).all())
            keys = {e.instance_key for e in events if e.instance_key and e.kind in ("ready", *ENDING_KINDS)}
            rows = (
                {r.key: r for r in s.scalars(select(InstanceRecord).where(InstanceRecord.key.in_(keys))).all()}
                if keys
                else {}
            )
            for event in events:
                self._event(event, rows.get(event.instance_key or ""))
            if events:
                self._last_event_id = events[-1].id if events[-1].id > self._last_event_id else self._last_event_id

    def _event(self, event: EventRecord, row: InstanceRecord | None) -> None:
        m, tier = self.m, event.tier
        if tier is None or (self._only is not None and tier not in self._only):  # another daemon's tier
            return
        m.events.labels(tier, event.kind).inc()
        if event.kind == "no-placement" and "budget" in event.message:
            m.budget_cap_hits.labels(tier).inc()
        if event.kind in INTERRUPTION_KINDS and event.instance_key not in self._interrupted:
            m.interruptions.labels(tier).inc()
            self._interrupted[event.instance_key or ""] = None
            while len(self._interrupted) > _REMEMBERED:
                self._interrupted.popitem(last=False)
        if row is None:
            return
        if event.kind == "ready" and row.ready_at is not None:
            m.launch_to_ready.labels(tier).observe(max(0.0, row.ready_at - row.created_at))
            for phase, seconds in to_entity(row).boot_phases().items():
                if seconds is not None:  # unknown is not observed as zero
                    m.boot_phase.labels(tier, phase).observe(seconds)
        if event.kind in ENDING_KINDS and row.drain_started_at is not None and row.ended_at is not None:
            m.drain_duration.labels(tier).observe(max(0.0, row.ended_at - row.drain_started_at))


def _remove(metric: Any, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # that series was never set
        metric.remove(*labels)
