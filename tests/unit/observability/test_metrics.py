"""The daemon's metrics: series exist from the start for known tiers and providers, unknown signals are
absent (never zero), and durations, interruptions, budget refusals and cost come from what was recorded."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scalectl.clocks import FakeClock
from scalectl.controller.app import open_store
from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.metrics_feed import MetricsFeed, decision_outcome
from scalectl.controller.provider_metrics import MeteredProvider
from scalectl.controller.reconciler.loop import TickReport, TierTick
from scalectl.controller.settings import Settings
from scalectl.controller.store.models import EventRecord, InstanceRecord
from scalectl.controller.store.repository import Store
from scalectl.policies.types import Signals
from scalectl.providers.base import GpuRequest
from scalectl.providers.errors import InstanceNotFound
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from scalectl.tiers.config import parse_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"


def samples(metrics: DaemonMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: DaemonMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = open_store(Settings(data_dir=tmp_path))
    text = EXAMPLE.read_text().replace("max: 20\n", "max: 20\n    budget_per_hour: 40\n", 1)
    store.config.apply(parse_config(text), text, "tiers.yaml", 0.0)
    return store


def _tick(t: float, **tiers: TierTick) -> TickReport:
    return TickReport(t=t, tiers=dict(tiers))


def _feed(feed: MetricsFeed, store: Store, report: TickReport) -> None:
    fleet = store.config.fleet_config()
    assert fleet is not None
    feed.observe(report, store, fleet.tiers, ["simulated"], 0.01)


def test_series_exist_at_zero_before_anything_happens(store: Store) -> None:
    metrics = DaemonMetrics("1.2.3")
    _feed(MetricsFeed(metrics), store, _tick(0.0))
    assert (
        value(
            metrics,
            "scalectl_build_info",
            version="1.2.3",
            python_version=platform.python_version(),
        )
        == 1
    )
    for tier in ("orchestrator", "research", "support-daytime"):
        assert value(metrics, "scalectl_decisions_total", tier=tier, outcome="scale_out") == 0
        assert value(metrics, "scalectl_instance_events_total", tier=tier, kind="create-failed") == 0
        assert value(metrics, "scalectl_interruptions_total", tier=tier) == 0
        assert value(metrics, "scalectl_launch_to_ready_seconds_count", tier=tier) == 0
        assert value(metrics, "scalectl_tier_instances", tier=tier, state="ready") == 0
    assert (
        value(metrics, "scalectl_provider_requests_total", provider="simulated", operation="create", outcome="error")
        == 0
    )
    assert value(metrics, "scalectl_provider_errors_total", provider="simulated") == 0
    assert value(metrics, "scalectl_tier_budget_hourly_dollars", tier="orchestrator") == 40
    assert value(metrics, "scalectl_tier_budget_hourly_dollars", tier="support-daytime") is None  # no cap: absent
    assert value(metrics, "scalectl_tier_target", tier="orchestrator", target="ttft_p95_max_seconds") == 0.5
    assert value(metrics, "scalectl_tier_target", tier="research", target="queue_per_instance") == 20
    assert value(metrics, "scalectl_tier_target", tier="support-daytime", target="queue_per_instance") is None
    assert any(name == "process_cpu_seconds_total" for name, _ in samples(metrics))


def test_signals_are_absent_while_unknown_and_decisions_count_by_outcome(store: Store) -> None:
    metrics = DaemonMetrics()
    feed = MetricsFeed(metrics)
    known = Signals(queue_depth=12.0, ttft_p95_s=0.31)
    _feed(feed, store, _tick(0.0, orchestrator=TierTick("orchestrator", 2, 3, "queue 12 > 10 × 2", 2, signals=known)))
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="queue_depth") == 12
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="ttft_p95_seconds") == 0.31
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="in_flight") is None
    held = TierTick(
        "orchestrator", 3, 3, "queue_depth unknown (no scale-in on missing data)", 3, errors={"vllm 10.0.0.7:8000": "x"}
    )
    _feed(feed, store, _tick(5.0, orchestrator=held))
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="queue_depth") is None
    assert value(metrics, "scalectl_tier_signals_unknown", tier="orchestrator") == 1
    assert value(metrics, "scalectl_decisions_total", tier="orchestrator", outcome="scale_out") == 1
    assert value(metrics, "scalectl_decisions_total", tier="orchestrator", outcome="hold_unknown_signals") == 1
    assert value(metrics, "scalectl_signal_errors_total", tier="orchestrator", source="vllm") == 1
    assert decision_outcome(4, 2, "quiet for 5m") == "scale_in"


def _instance(key: str, **fields: float | None) -> InstanceRecord:
    base = dict(
        tier="research", provider="simulated", offer_id="o", gpu="A100-80GB-PCIe", region="r", capacity="spot",
        price_per_hour=2.0, created_at=100.0, updated_at=100.0, state="ready",
    )  # fmt: skip
    return InstanceRecord(key=key, **{**base, **fields})


def test_durations_interruptions_budget_and_cost_come_from_the_records(store: Store) -> None:
    metrics = DaemonMetrics()
    feed = MetricsFeed(metrics)
    with store.sessions.begin() as s:
        s.add(_instance("sc-research-1", ready_at=250.0, running_at=160.0))
    _feed(feed, store, _tick(0.0))  # the first tick starts counting events from here
    with store.sessions.begin() as s:
        s.add(_instance("sc-research-2", state="terminated", ready_at=200.0, drain_started_at=300.0, ended_at=360.0))
        for kind, key, message in [
            ("ready", "sc-research-1", "running"),
            ("interruption-notice", "sc-research-2", "warned"),
            ("interrupted", "sc-research-2", "preempted"),
            ("retired", "sc-research-2", "drained"),
            ("no-placement", None, "cannot place an instance of A100-80GB-PCIe: budget"),
            ("no-placement", None, "cannot place an instance of A100-80GB-PCIe: no available offer"),
        ]:
            s.add(EventRecord(t=300.0, tier="research", instance_key=key, kind=kind, message=message))
    _feed(feed, store, _tick(3600.0))
    _feed(feed, store, _tick(7200.0))  # the same events are not counted twice
    assert value(metrics, "scalectl_launch_to_ready_seconds_count", tier="research") == 1
    assert value(metrics, "scalectl_launch_to_ready_seconds_sum", tier="research") == 150
    # the boot's phases: running at 160 (60 s after the intent), serving at 250 (90 s later)
    assert value(metrics, "scalectl_boot_phase_seconds_sum", tier="research", phase="provisioning") == 60
    assert value(metrics, "scalectl_boot_phase_seconds_sum", tier="research", phase="bootstrapping") == 90
    assert value(metrics, "scalectl_drain_duration_seconds_sum", tier="research") == 60
    assert value(metrics, "scalectl_interruptions_total", tier="research") == 1  # one instance, notice + end
    assert value(metrics, "scalectl_budget_cap_hits_total", tier="research") == 1
    assert value(metrics, "scalectl_instance_events_total", tier="research", kind="no-placement") == 2
    assert value(metrics, "scalectl_tier_hourly_cost_dollars", tier="research") == 2.0
    assert value(metrics, "scalectl_tier_cost_per_hour_dollars", tier="research") == 2.0  # deprecated alias
    assert value(metrics, "scalectl_tier_cost_dollars_total", tier="research") == pytest.approx(4.0)  # 2 h × $2


async def test_provider_calls_are_counted_by_operation_and_outcome() -> None:
    metrics = DaemonMetrics()
    cloud = MeteredProvider(SimulatedCloud(ProviderConfig(name="simulated", type="simulated"), FakeClock()), metrics)
    await cloud.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1))
    with pytest.raises(InstanceNotFound):
        await cloud.get("no-such-instance")
    assert (
        value(metrics, "scalectl_provider_requests_total", provider="simulated", operation="offers", outcome="ok") == 1
    )
    assert value(metrics, "scalectl_provider_requests_total", provider="simulated", operation="get", outcome="ok") == 1


def test_sharded_each_daemon_reports_only_the_tiers_it_acts_on(store: Store) -> None:
    """Summed over the daemons, a tier's instances, cost and events count once: from its holder only."""
    fleet = store.config.fleet_config()
    assert fleet is not None
    holder, other = DaemonMetrics(), DaemonMetrics()
    feeds = {"research": MetricsFeed(holder), "orchestrator": MetricsFeed(other)}
    for owned, feed in feeds.items():
        feed.observe(_tick(0.0), store, fleet.tiers, ["simulated"], 0.01, owned=[owned])
    with store.sessions.begin() as s:
        s.add(_instance("sc-research-1"))
        s.add(EventRecord(t=300.0, tier="research", instance_key="sc-research-1", kind="ready", message="up"))
    for owned, feed in feeds.items():
        feed.observe(_tick(3600.0), store, fleet.tiers, ["simulated"], 0.01, owned=[owned])
    assert value(holder, "scalectl_tier_instances", tier="research", state="ready") == 1
    assert value(holder, "scalectl_instance_events_total", tier="research", kind="ready") == 1
    assert value(other, "scalectl_tier_instances", tier="research", state="ready") is None
    assert value(other, "scalectl_instance_events_total", tier="research", kind="ready") is None
    assert value(other, "scalectl_tier_hourly_cost_dollars", tier="research") is None
    assert value(other, "scalectl_tier_instances", tier="orchestrator", state="ready") == 0


def test_instances_cost_and_the_oldest_unready_come_from_one_grouped_read(store: Store) -> None:
    metrics = DaemonMetrics()
    feed = MetricsFeed(metrics)
    with store.sessions.begin() as s:
        s.add(_instance("sc-research-a", state="provisioning", created_at=1000.0, price_per_hour=1.5))
        s.add(_instance("sc-research-b", state="provisioning", created_at=1600.0, price_per_hour=1.5))
        s.add(_instance("sc-research-c", state="ready", created_at=10.0))  # ready: its age is no concern
        s.add(_instance("sc-research-d", state="terminated", created_at=5.0, ended_at=50.0))  # not live
    _feed(feed, store, _tick(3600.0))
    assert value(metrics, "scalectl_tier_instances", tier="research", state="provisioning") == 2
    assert value(metrics, "scalectl_tier_instances", tier="research", state="ready") == 1
    assert value(metrics, "scalectl_tier_hourly_cost_dollars", tier="research") == 5.0
    assert value(metrics, "scalectl_tier_oldest_unready_seconds", tier="research") == 2600.0
    assert value(metrics, "scalectl_tier_oldest_unready_seconds", tier="orchestrator") == 0.0


def test_the_ttft_the_policy_holds_and_the_rates_decisions_quote_are_exported(store: Store) -> None:
    """The dashboard plots the quantile the policy holds (p99 unless ``ttft_quantile`` says otherwise) against
    ``ttft_max``, and the request rate the policy sizes on; all absent while unknown."""
    metrics = DaemonMetrics()
    feed = MetricsFeed(metrics)
    known = Signals(ttft_p95_s=0.31, ttft_p99_s=0.62, request_rate=41.5, finish_rate=40.0)
    _feed(feed, store, _tick(0.0, orchestrator=TierTick("orchestrator", 2, 2, "hold", 2, signals=known)))
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="ttft_held_seconds") == 0.62  # p99
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="ttft_p99_seconds") == 0.62
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="requests_per_second") == 41.5
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="finished_per_second") == 40.0
    assert value(metrics, "scalectl_tier_target", tier="orchestrator", target="ttft_max_seconds") == 0.5
    assert value(metrics, "scalectl_tier_target", tier="orchestrator", target="ttft_quantile") == 0.99
    _feed(feed, store, _tick(5.0, orchestrator=TierTick("orchestrator", 2, 2, "hold", 2, signals=Signals())))
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="ttft_held_seconds") is None
    assert value(metrics, "scalectl_tier_signal", tier="orchestrator", signal="requests_per_second") is None
