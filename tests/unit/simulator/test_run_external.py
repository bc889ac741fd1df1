"""External policies run in the simulator exactly like built-ins: loaded by class path, decided each tick."""

from __future__ import annotations

from scalectl.simulator.controller_run import RunOptions, simulate
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  web:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 6
    policy:
      kind: external
      class: "{cls}"
      options: {options}
"""

WORKLOAD = """
seed: 8
duration: 50m
tiers:
  web:
    kind: poisson
    rate: 30
    ttft_target: 500ms
    shape: [{kind: spike, at: 10m, duration: 20m, factor: 3}]
"""


def run(cls: str, options: str) -> tuple[list[tuple[int, int, str]], dict[str, int], float]:
    text = TIERS.format(cls=cls, options=options)
    result = simulate(
        parse_config(text, "tiers.yaml"), text, parse_workload(WORKLOAD), options=RunOptions(baselines=False)
    )
    assert result.store is not None
    decisions = [(d.current, d.desired, d.reason) for d in result.store.records.decisions("web", limit=100_000)]
    return decisions, result.events, result.report.tiers["web"].cost


def test_target_tracking_example_policy_scales_the_tier_on_request_rate() -> None:
    decisions, events, cost = run(
        "examples.policies.target_tracking:RequestRateTargetTracking", "{target_rps: 40, scale_in_ratio: 0.8}"
    )
    ups = [d for d in decisions if d[1] > d[0]]
    downs = [d for d in decisions if d[1] < d[0]]
    assert ups and downs
    assert all("req/s" in reason for _, _, reason in ups + downs)
    assert max(d[1] for d in decisions) in (3, 4)  # 90 req/s at the spike / 40 per instance
    assert events["launched"] >= 2 and events["retired"] >= 1 and cost > 0


def test_keda_style_policy_scales_on_its_metric_with_a_stabilisation_window() -> None:
    decisions, events, _ = run(
        "examples.policies.keda_scaler:KedaScaledObject",
        '{metric: "requests_running+requests_waiting", target: 40, stabilization_window: 5m}',
    )
    ups = [d for d in decisions if d[1] > d[0]]
    downs = [d for d in decisions if d[1] < d[0]]
    assert ups and downs
    assert all("requests_running+requests_waiting" in reason for _, _, reason in ups + downs)
    assert events["launched"] >= 2 and events["retired"] >= 1
