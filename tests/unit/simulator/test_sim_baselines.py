from __future__ import annotations

import pytest

from policies.types import Signals
from simulator.baselines import (
    BaselineSettings,
    Reactive,
    need_timeline,
    oracle,
    run_baselines,
    static_count,
)
from simulator.fleet import tier_models
from simulator.workloads.spec import parse_workload

WORKLOAD = """
seed: 2
start: 2026-03-16T06:00:00+00:00
duration: 2h
tiers:
  chat:
    kind: poisson
    rate: 60
    input_tokens: {mean: 900, cv: 0.4}
    output_tokens: {mean: 250, cv: 0.5}
    shape: [{kind: diurnal, peak: "07:00-08:00", timezone: UTC, low: 0.2, ramp: 30m}]
  agents:
    kind: sessions
    sessions: 150
    prefix_cache_hit: 0.8
    shape: [{kind: spike, at: 1h, duration: 30m, factor: 2.0}]
  jobs:
    kind: batch
    bursts: [{at: 30m, tasks: 300, over: 1m}]
    task_time: {mean: 60s, cv: 0.3}
    concurrency: 8
    wait_target: 5m
"""


@pytest.fixture
def setup(tier):
    w = parse_workload(WORKLOAD)
    tiers = {"chat": tier(), "agents": tier(), "jobs": tier(gpu="A100-80GB-PCIe", capacity="spot")}
    return w, tier_models(w, tiers)


def test_oracle_is_never_above_static(setup) -> None:
    w, models = setup
    for name, model in models.items():
        _grid, need = need_timeline(w, model)
        static_cost = static_count(w, model) * model.price_per_hour * w.duration / 3600
        assert oracle(w, model).cost <= static_cost + 1e-9, name
        assert need.max() >= 1
    # The chat peak needs more instances than its night; the session spike doubles the agents' need.
    _, chat_need = need_timeline(w, models["chat"])
    assert chat_need.max() > chat_need.min()
    _, agents_need = need_timeline(w, models["agents"])
    assert agents_need[75] >= agents_need[10]


def test_batch_oracle_is_the_task_seconds_over_concurrency(setup) -> None:
    w, models = setup
    jobs = models["jobs"]
    hours = oracle(w, jobs).gpu_hours
    assert hours == pytest.approx(300 * 60 / 8 / 3600, rel=0.1)


def test_reactive_scales_up_at_once_and_down_after_the_stabilisation_window(setup) -> None:
    w, models = setup
    decide = Reactive(w, {"jobs": models["jobs"]}, BaselineSettings())
    busy = Signals(queue_depth=100.0, in_flight=60.0)
    idle = Signals(queue_depth=0.0, in_flight=0.0)
    assert decide("jobs", 0.0, busy, 0) == 20  # ceil(160 / 8)
    assert decide("jobs", 30.0, idle, 20) == 20  # held: 20 was desired within the last 300 s
    assert decide("jobs", 290.0, idle, 20) == 20
    assert decide("jobs", 331.0, idle, 20) == 0  # the window has passed
    assert decide("jobs", 360.0, Signals(), 3) == 3  # no reading: hold


def test_baselines_run_on_the_same_fleet_model(setup) -> None:
    w, models = setup
    result = run_baselines(w, models, BaselineSettings(provisioning_delay_s=120.0))
    for name in models:
        static, reactive, orc = result[name]["static"], result[name]["reactive"], result[name]["oracle"]
        assert orc.cost <= static.cost
        assert static.slo_attainment is not None and static.slo_attainment > 0.95, name
        assert reactive.slo_attainment is not None
        assert reactive.cost > 0
