"""The daemon's /metrics: the capacity gauge of target-tracking tiers, the learned figures of batch tiers."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.store.db import make_engine
from scalectl.controller.store.models import Base
from scalectl.controller.store.repository import Store
from scalectl.policies.types import PolicyState
from scalectl.tiers.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiers.yaml"


def test_capacity_per_instance_is_a_gauge_per_target_mode_tier() -> None:
    from scalectl.policies.core.capacity import CapacityState, observe
    from scalectl.policies.core.forecast import ErrorTrack
    from scalectl.policies.core.pipeline import CoreState, MeasureState

    config, text = load_config(EXAMPLE)
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    store.config.apply(config, text, "test", 0.0)
    metrics = DaemonMetrics()
    metrics.observe_capacity(store)
    before = generate_latest(metrics.registry).decode()
    assert 'scalectl_tier_capacity_per_instance{source="used",tier="orchestrator"}' not in before  # unknown: absent
    assert "scalectl_tier_demand_forecast{" not in before
    cap = CapacityState()
    for i in range(400):  # 8 ready at 40–79 req/s each against a prior of 100: breaches from 60
        per_instance = 40 + (i % 40)
        cap = observe(cap, now=60.0 * i, prior=100.0, rate=8 * per_instance, ready=8,
                      ttft=2.0 if per_instance >= 60 else 0.2, target=0.5, waiting=0)  # fmt: skip
    sized = ErrorTrack().file(0.0, 600.0, 40.0).settle(600.0, 44.0).file(600.0, 1200.0, 50.0)
    core = CoreState(last_t=1.0, measures={"requests": MeasureState(capacity=cap, sized=sized)})
    with store.sessions.begin() as session:
        store.policy.save(session, "orchestrator", PolicyState(core=core), 3, 1.0)
    metrics.observe_capacity(store)
    text_out = generate_latest(metrics.registry).decode()
    assert 'scalectl_tier_capacity_per_instance{source="prior",tier="orchestrator"} 100.0' in text_out
    assert 'scalectl_tier_capacity_per_instance{source="used",tier="orchestrator"} 60.0' in text_out
    # forecast vs actual: the forecast made for t=600 (40 req/s) beside what came (44), and the next one (50)
    demand = 'scalectl_tier_demand_forecast{measure="requests",series="%s",tier="orchestrator"} %s'
    assert demand % ("forecast", "40.0") in text_out and demand % ("actual", "44.0") in text_out
    assert demand % ("ahead", "50.0") in text_out
    assert 'series="error_p90"' not in text_out  # one error measured: unknown, absent
    assert 'tier="research"' not in text_out.split("scalectl_tier_capacity_per_instance", 1)[1].split("# HELP", 1)[0]


def test_a_max_wait_batch_tier_shows_its_task_time_and_whether_it_serves_in_rounds() -> None:
    from tests.unit.policies.batch_learned import learned_runner, measured_boots

    config, text = load_config(EXAMPLE.parent / "tiers" / "batch-night.yaml")  # max_wait: 10m
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    store = Store(engine)
    store.config.apply(config, text, "test", 0.0)
    metrics = DaemonMetrics()
    metrics.observe_capacity(store)
    text_out = generate_latest(metrics.registry).decode()
    assert 'scalectl_tier_batch_rounds{tier="research"} 0.0' in text_out
    assert 'scalectl_tier_batch_task_seconds{tier="research"}' not in text_out  # nothing learned: absent, not 0
    learned = measured_boots(learned_runner(), 180, 180, 180).state.learned  # 90 s tasks, 8 slots
    with store.sessions.begin() as session:
        store.policy.save(session, "research", PolicyState(learned=learned), 4, 1.0)
    metrics.observe_capacity(store)
    text_out = generate_latest(metrics.registry).decode()
    task = float(text_out.split('scalectl_tier_batch_task_seconds{tier="research"} ', 1)[1].split()[0])
    assert abs(task - 90) < 1
    assert 'scalectl_tier_batch_rounds{tier="research"} 0.0' in text_out  # 10 minutes: the worker is kept
