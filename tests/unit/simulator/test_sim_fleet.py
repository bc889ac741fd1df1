from __future__ import annotations

import numpy as np
import pytest

from scalectl.simulator.fleet import Fleet, tier_models
from scalectl.simulator.report import build_report
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.sizing.gpus import gpu_info

WORKLOAD = """
seed: 4
duration: 20m
tiers:
  chat: {kind: poisson, rate: 30, input_tokens: 800, output_tokens: {mean: 200, cv: 0.5}}
  jobs: {kind: batch, rate: 0.5, task_time: 40s, concurrency: 4, wait_target: 2m}
"""


@pytest.fixture
def fleet(tier) -> Fleet:
    w = parse_workload(WORKLOAD)
    return Fleet(w, tier_models(w, {"chat": tier(), "jobs": tier(gpu="A100-80GB-PCIe", capacity="spot")}))


def _advance(fleet: Fleet, t0: float, t1: float) -> None:
    t = t0
    while t < t1:
        fleet.advance(t, t + 5.0)
        t += 5.0


def test_signals_are_unknown_without_instances_and_filled_with_them(fleet: Fleet) -> None:
    _advance(fleet, 0, 30)
    s = fleet.signals("chat")
    assert s.requests_running is None and s.ttft_p95_s is None and s.kv_cache_usage is None
    assert s.finish_rate is None  # no endpoint answers
    assert s.request_rate is not None and s.request_rate > 10
    fleet.set_instances("chat", ["c1", "c2"], now=30.0)
    fleet.set_instances("jobs", ["j1"], now=30.0)
    _advance(fleet, 30, 120)
    s = fleet.signals("chat")
    assert s.requests_running is not None and s.requests_running > 0
    assert s.ttft_p95_s is not None and 0.05 < s.ttft_p95_s < 2.0
    assert 0 < (s.kv_cache_usage or 0) < 1
    assert s.arrivals is not None and s.arrivals > 50
    # Two instances keep up with this load: within the window they finish about what arrives.
    assert s.finish_rate is not None and s.request_rate is not None
    assert 0.5 * s.request_rate < s.finish_rate < 1.5 * s.request_rate
    assert fleet.signals("jobs").queue_depth is not None


def test_rates_in_the_first_minute_are_over_the_time_the_window_spans(fleet: Fleet) -> None:
    """As the /metrics reader divides by its snapshots' span: 15 s into the day, 30 req/s reads about 30,
    not the 7.5 a full minute's length would make of it."""
    fleet.set_instances("chat", ["c1", "c2"], now=0.0)
    _advance(fleet, 0, 15)
    s = fleet.signals("chat")
    assert s.request_rate is not None and 20 < s.request_rate < 40
    assert s.prompt_tokens_rate is not None and 20 * 800 < s.prompt_tokens_rate < 40 * 800


def test_preempted_instance_requests_are_retried_and_served(fleet: Fleet) -> None:
    fleet.set_instances("chat", ["c1", "c2"], now=0.0)
    _advance(fleet, 0, 60)
    in_flight = fleet.serving["chat"].in_flight_by_instance()
    moved = fleet.interrupt("chat", ["c1"], now=60.0)
    assert moved == in_flight["c1"] > 0
    _advance(fleet, 60, 200)
    rec = fleet.serving["chat"].record
    assert rec.retries == moved
    assert fleet.meters["chat"].interruptions == 1
    served = sum(x.shape[0] for x in rec.e2e)
    waiting = len(fleet.serving["chat"]._inflight)
    assert served + waiting == rec.arrivals  # nothing dropped


def test_draining_instance_finishes_its_requests_and_gets_no_new_ones(fleet: Fleet) -> None:
    fleet.set_instances("chat", ["c1", "c2"], now=0.0)
    _advance(fleet, 0, 60)
    fleet.set_instances("chat", ["c1"], draining=["c2"], now=60.0)
    _advance(fleet, 60, 65)
    fleet.set_instances("chat", ["c1"], now=65.0)  # c2 gone after draining: graceful, no retry
    _advance(fleet, 65, 200)
    assert fleet.serving["chat"].record.retries == 0
    assert fleet.meters["chat"].interruptions == 0
    assert set(fleet.serving["chat"].in_flight_by_instance()) == {"c1"}


def test_report_counts_requests_cost_and_slo(fleet: Fleet) -> None:
    fleet.set_instances("chat", ["c1", "c2"], now=0.0)
    fleet.set_instances("jobs", ["j1"], now=0.0)
    _advance(fleet, 0, 1200)
    report = build_report(fleet, 1200.0)
    chat, jobs = report.tiers["chat"], report.tiers["jobs"]
    assert chat.requests == pytest.approx(30 * 1200, rel=0.05)
    assert chat.slo_attainment is not None and chat.slo_attainment > 0.98
    assert chat.cost == pytest.approx(2 * 2.40 * 1200 / 3600)  # two on-demand H100s for 20 minutes
    spot_a100 = gpu_info("A100-80GB-PCIe").spot_per_hour
    assert spot_a100 is not None and jobs.cost == pytest.approx(spot_a100 * 1200 / 3600)  # one spot A100
    assert jobs.lost_tasks == 0 and jobs.requests == pytest.approx(600, rel=0.15)
    assert np.isfinite(report.total()["cost"])
