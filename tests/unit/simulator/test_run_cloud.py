"""The ``cloud:`` section: spot interruptions (with storms) and capacity shortages, through the controller."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sqlalchemy import select

from scalectl.controller.store.models import InstanceRecord
from scalectl.simulator.cloud_events import preemption_time, rate_segments
from scalectl.simulator.controller_run import RunOptions, simulate
from scalectl.simulator.workloads.spec import CloudSpec, WorkloadError, parse_workload
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  jobs:
    capacity: spot
    fallback: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 0
    max: 20
    drain_timeout: 10m
    policy: {kind: scale-to-zero, queue_per_instance: 8, activate_after: 30s, idle_after: 5m}
"""

WORKLOAD = """
seed: 2
duration: 3h
warmup: cold
tiers:
  jobs:
    kind: batch
    rate: 0.15
    bursts: [{at: 30m, tasks: 300, over: 2m}]
    task_time: {mean: 90s, cv: 0.4}
    concurrency: 8
    wait_target: 15m
cloud:
  provision_delay: [2m, 4m]
  spot_interruptions_per_hour: 0.2
  notice: 2m
  storms: [{from: 40m, until: 1h40m, spot_interruptions_per_hour: 6}]
"""


def test_rate_segments_put_storms_over_the_base_rate() -> None:
    spec = CloudSpec.model_validate(
        {"spot_interruptions_per_hour": 1, "storms": [{"from": "1h", "until": "2h", "spot_interruptions_per_hour": 5}]}
    )
    segs = [(s.start, s.end, s.per_hour) for s in rate_segments(spec)]
    assert segs == [(0.0, 3600.0, 1.0), (3600.0, 7200.0, 5.0), (7200.0, math.inf, 1.0)]


def test_preemption_times_follow_the_piecewise_rate() -> None:
    spec = CloudSpec.model_validate({"storms": [{"from": "1h", "until": "2h", "spot_interruptions_per_hour": 2}]})
    segs = rate_segments(spec)
    # Outside the storm the rate is 0: an instance alive from 0 can only be preempted inside the window.
    assert preemption_time(segs, 0.0, 1.0) == pytest.approx(3600.0 + 1800.0)  # exposure 1 at 2/h: 30 min in
    assert preemption_time(segs, 0.0, 3.0) is None  # the window only holds exposure 2
    assert preemption_time(segs, 7200.0, 0.1) is None
    rng = np.random.default_rng(1)
    base = rate_segments(CloudSpec.model_validate({"spot_interruptions_per_hour": 0.5}))
    lifetimes = [preemption_time(base, 0.0, float(rng.exponential())) for _ in range(4000)]
    assert np.mean([x for x in lifetimes if x is not None]) == pytest.approx(7200.0, rel=0.05)  # 1 / (0.5/h)


def test_a_spot_storm_interrupts_workers_and_no_task_is_lost() -> None:
    result = simulate(parse_config(TIERS), TIERS, parse_workload(WORKLOAD), options=RunOptions(baselines=False))
    jobs = result.report.tiers["jobs"]
    assert result.interruptions_scheduled > 0
    assert jobs.interruptions > 0 and result.events.get("interruption-notice", 0) > 0
    assert jobs.retries > 0  # tasks on interrupted workers went back to the queue ...
    assert jobs.lost_tasks == 0  # ... and every one was accounted for
    assert result.store is not None
    with result.store.sessions() as s:
        interrupted = list(s.scalars(select(InstanceRecord).where(InstanceRecord.interrupted.is_(True))).all())
    start = parse_workload(WORKLOAD).start_epoch
    # Most notices landed inside the storm window (the base rate is 30 times lower).
    inside = [r for r in interrupted if r.drain_started_at and 2400 <= r.drain_started_at - start <= 6000]
    assert len(inside) >= len(interrupted) / 2


def test_no_spot_capacity_falls_back_to_on_demand_and_back() -> None:
    workload = WORKLOAD.replace(
        "  storms: [{from: 40m, until: 1h40m, spot_interruptions_per_hour: 6}]",
        "  capacity: {H100-SXM5-80GB: {spot: 0, from: 0s, until: 2h}}",
    )
    result = simulate(parse_config(TIERS), TIERS, parse_workload(workload), options=RunOptions(baselines=False))
    assert result.store is not None
    with result.store.sessions() as s:
        rows = list(s.scalars(select(InstanceRecord)).all())
    start = parse_workload(workload).start_epoch
    early = [r for r in rows if r.launched_at is not None and r.launched_at - start < 7200]
    late = [r for r in rows if r.launched_at is not None and r.launched_at - start > 7300]
    assert early and all(r.capacity == "on-demand" for r in early)
    assert result.events.get("no-capacity", 0) > 0
    # Spot is back (and cheaper than on-demand for this GPU): new and replacement instances are spot again.
    assert late and any(r.capacity == "spot" for r in late)
    assert result.report.tiers["jobs"].lost_tasks == 0


def test_cloud_section_errors_name_the_field() -> None:
    with pytest.raises(WorkloadError, match=r"w.yaml: cloud.storms\[0\]: `until` \(3600s\) must come after"):
        parse_workload(
            "tiers: {a: {kind: poisson, rate: 1}}\n"
            "cloud: {storms: [{from: 2h, until: 1h, spot_interruptions_per_hour: 3}]}",
            "w.yaml",
        )
    with pytest.raises(WorkloadError, match=r"cloud.capacity: unknown GPU 'Z9'"):
        parse_workload("tiers: {a: {kind: poisson, rate: 1}}\ncloud: {capacity: {Z9: {spot: 0}}}", "w.yaml")


TWO_ACCOUNTS = """
tiers:
  jobs:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [sim-a, sim-b]
    min: 0
    max: 8
    policy: {kind: scale-to-zero, queue_per_instance: 8, activate_after: 30s, idle_after: 5m}
providers:
  sim-a: {type: simulated}
  sim-b: {type: simulated}
"""


def test_two_simulated_accounts_never_share_an_instance_id() -> None:
    # Two machines per region and account: the burst's 8 machines split 4 and 4 between the accounts.
    workload = """
seed: 2
duration: 40m
warmup: cold
tiers:
  jobs:
    kind: batch
    bursts: [{at: 1m, tasks: 400, over: 1m}]
    task_time: {mean: 90s, cv: 0.4}
    concurrency: 8
    wait_target: 15m
cloud:
  provision_delay: [2m, 4m]
  capacity: {H100-SXM5-80GB: {on-demand: 2}}
"""
    result = simulate(
        parse_config(TWO_ACCOUNTS), TWO_ACCOUNTS, parse_workload(workload), options=RunOptions(baselines=False)
    )
    assert result.store is not None
    with result.store.sessions() as s:
        rows = list(s.scalars(select(InstanceRecord)).all())
    assert {r.provider for r in rows} == {"sim-a", "sim-b"} and len(rows) == 8
    assert len({r.provider_id for r in rows}) == 8
    assert result.report.tiers["jobs"].peak_instances == 8  # all 8 billed machines served (was 4: ids collided)
