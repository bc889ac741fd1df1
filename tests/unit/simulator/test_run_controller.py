"""The real controller on virtual time: decisions with reasons, launches and retirements, billing, no lost work."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from scalectl.controller.store.models import DecisionRecord, InstanceRecord
from scalectl.simulator.controller_run import RunOptions, SimulationInputError, SimulationResult, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 8
    serving: {target_concurrency: 100}
    policy:
      kind: min-floor
      floor: 1
      ttft_max: 400ms
  jobs:
    capacity: spot
    fallback: on-demand
    gpu: A100-80GB-PCIe
    providers: [simulated]
    min: 0
    max: 12
    drain_timeout: 10m
    policy: {kind: scale-to-zero, queue_per_instance: 8, activate_after: 30s, idle_after: 3m}
"""

# A quiet start, then six times the load for 25 minutes, then quiet again; a batch burst at 20 minutes.
# Cold: the fleet opens on its floor (a steady warm-up launches and retires instances of its own, which
# moves the boot delays the spike's launches draw).
WORKLOAD = """
seed: 4
start: "2026-03-16T10:00:00+00:00"
duration: 80m
warmup: cold
cloud: {provision_delay: [2m, 5m]}    # the controller's machinery under the old uniform boot, not the boot model
tiers:
  web:
    kind: poisson
    rate: 80
    input_tokens: {mean: 800, cv: 0.4}
    output_tokens: {mean: 250, cv: 0.5}
    ttft_target: 500ms
    shape:
      - {kind: constant, factor: 0.25}
      - {kind: spike, at: 15m, duration: 25m, factor: 6}
  jobs:
    kind: batch
    bursts: [{at: 20m, tasks: 120, over: 1m}]
    task_time: {mean: 60s, cv: 0.4}
    concurrency: 8
    wait_target: 10m
"""

FAST = RunOptions(baselines=False)


def run(tiers: str = TIERS, workload: str = WORKLOAD, **kwargs: Any) -> SimulationResult:
    return simulate(parse_config(tiers, "tiers.yaml"), tiers, parse_workload(workload, "w.yaml"), **kwargs)


@pytest.fixture(scope="module")
def day() -> SimulationResult:
    return run(options=FAST)


def test_decisions_are_recorded_with_the_policies_reasons(day: SimulationResult) -> None:
    assert day.store is not None
    rows = day.store.records.decisions(limit=100_000)
    web = [d for d in rows if d.tier == "web"]
    jobs = [d for d in rows if d.tier == "jobs"]
    assert day.decisions == len(rows) > 0
    assert all(d.reason for d in rows)
    # The spike made the decision core scale out on its forecast, and the end of it scale back in.
    assert any(d.reason.startswith("need ") and d.desired > d.current for d in web), [d.reason for d in web][:20]
    assert any(d.desired < d.current for d in web)
    assert any(d.reason.startswith("queue ") and d.desired > d.current for d in jobs)
    assert any(d.desired == 0 and d.current > 0 for d in jobs)  # back to zero after the burst


def test_instances_launched_and_retired_gracefully_with_nothing_lost(day: SimulationResult) -> None:
    assert day.store is not None
    with day.store.sessions() as s:
        rows = list(s.scalars(select(InstanceRecord)).all())
    web = [r for r in rows if r.tier == "web"]
    jobs = [r for r in rows if r.tier == "jobs"]
    assert len(web) >= 2 and len(jobs) >= 2
    assert any(r.state == "terminated" for r in web) and all(r.state == "terminated" for r in jobs)
    assert day.events["launched"] == len(rows)
    assert day.events["retired"] >= len(jobs)
    report = day.report
    assert report.tiers["jobs"].lost_tasks == 0 and report.tiers["jobs"].requests == 120
    assert report.tiers["web"].peak_instances >= 2
    assert report.tiers["web"].slo_attainment is not None and report.tiers["web"].slo_attainment > 0.9
    # Graceful drains: the drain check waited for the fleet model, so no request was cut and retried.
    assert report.tiers["web"].retries == 0 and report.tiers["jobs"].retries == 0
    assert report.tiers["web"].interruptions == 0


def test_cost_is_what_the_simulated_cloud_billed(day: SimulationResult) -> None:
    report = day.report
    total = report.total()["cost"]
    assert total == pytest.approx(day.billed, rel=1e-9)
    assert day.billed_with_warmup > day.billed  # the warm-up floor was billed, but not to the report
    for outcome in report.tiers.values():  # GPU-hours follow the billed seconds, provisioning included
        assert outcome.cost > 0 and outcome.gpu_hours > 0


def test_the_minute_series_count_every_request_judged_and_missed(day: SimulationResult) -> None:
    """The per-minute counts (bench/bench_hours.py breaks a day down by them) add up to the SLO's own."""
    web = day.report.tiers["web"]
    series = day.report.series()["web"]
    assert series["judged"].sum() == web.slo_known
    assert series["missed"].sum() == web.slo_known - web.slo_met > 0  # the spike's first minutes missed
    assert series["judged"].shape == series["missed"].shape == series["t_q"].shape
    assert "missed" not in day.report.series()["jobs"]  # a batch tier is judged by its waits


def test_same_seed_same_report_and_another_seed_differs() -> None:
    first = run(options=FAST).report.to_dict()
    again = run(options=FAST).report.to_dict()
    assert first == again
    other = run(workload=WORKLOAD.replace("seed: 4", "seed: 5"), options=FAST).report.to_dict()
    assert other["tiers"]["web"]["requests"] != first["tiers"]["web"]["requests"]


def test_baselines_run_on_the_same_workload_in_the_same_run() -> None:
    short = WORKLOAD.replace("duration: 80m", "duration: 30m")
    told: dict[bool, list[list[str]]] = {True: [], False: []}
    parallel = run(workload=short, options=RunOptions(parallel_baselines=True), waiting=told[True].append).report
    serial = run(workload=short, options=RunOptions(parallel_baselines=False), waiting=told[False].append).report
    assert parallel.to_dict() == serial.to_dict()
    # Once the controller is done, the run says which baselines it still waits for, until none is left.
    labels = ["oracle, clairvoyant and static", "reactive (KEDA/HPA)", "SkyServe-style"]
    assert told[False] == [labels, []]
    assert told[True][-1] == []
    for before, after in zip(told[True], told[True][1:], strict=False):
        assert set(after) < set(before) <= set(labels)
    assert set(parallel.baselines["web"]) == {"static", "reactive", "skyserve", "oracle", "clairvoyant"}
    assert set(parallel.baselines["jobs"]) == {"static", "reactive", "oracle", "clairvoyant"}  # SkyServe: HTTP only
    for name in ("web", "jobs"):
        assert parallel.baselines[name]["oracle"].cost > 0
    assert parallel.to_dict()["tiers"]["web"]["cost_vs_oracle"] > 0


def test_a_workload_tier_missing_from_the_tiers_file_names_file_and_tier() -> None:
    bad = WORKLOAD.replace("  jobs:\n    kind: batch", "  nightly:\n    kind: batch")
    with pytest.raises(SimulationInputError, match=r'w.yaml: tier "nightly": not in the tiers file'):
        run(workload=bad, options=FAST, workload_source="w.yaml")


def test_an_external_policy_that_cannot_load_is_refused_before_the_run() -> None:
    tiers = TIERS.replace(
        "kind: scale-to-zero, queue_per_instance: 8, activate_after: 30s, idle_after: 3m",
        'kind: external, class: "examples.policies.nowhere:Nothing"',
    )
    with pytest.raises(SimulationInputError, match=r'tier "jobs": policy.class: module .examples.policies.nowhere'):
        run(tiers=tiers, options=FAST)


def test_decision_rows_carry_the_signals_the_policy_saw(day: SimulationResult) -> None:
    assert day.store is not None
    with day.store.sessions() as s:
        row = s.scalars(select(DecisionRecord).where(DecisionRecord.tier == "web", DecisionRecord.desired > 1)).first()
    assert row is not None
    assert row.signals["ttft_p95_s"] > 0 and "requests_running" in row.signals and "queue_depth" in row.signals
