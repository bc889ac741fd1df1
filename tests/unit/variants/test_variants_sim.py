"""Variants in the simulator: a shortage of the tier's own GPU is filled by its variants (their own engines,
their own prices), traffic is split by weighted least connections, and the report gives the mix."""

from __future__ import annotations

import numpy as np
import pytest

from scalectl.simulator.controller_run import RunOptions, SimulationInputError, simulate
from scalectl.simulator.mixed_pool import weighted_least_connections
from scalectl.simulator.workloads.spec import parse_workload
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  api:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 12
    policy: {kind: min-floor, floor: 1, ttft_max: 500ms}
"""
VARIANTS = "    variants: [{gpu: L40S, gpu_count: 2}]\n"

# 40 req/s of short requests (one H100 serves them), then ×4 from 10 min, when no new H100 can be had.
WORKLOAD = """
seed: 3
duration: 40m
warmup: cold
tiers:
  api:
    kind: poisson
    rate: 40
    input_tokens: {mean: 600, cv: 0.5, max: 2000}
    output_tokens: {mean: 150, cv: 0.5, max: 512}
    ttft_target: 500ms
    shape: [{kind: spike, at: 10m, duration: 30m, factor: 4}]
cloud:
  provision_delay: [2m, 3m]
  capacity: {H100-SXM5-80GB: {on-demand: 0, from: 5m}}
"""


def _run(tiers: str) -> tuple[float, dict[str, float], float]:
    result = simulate(parse_config(tiers), tiers, parse_workload(WORKLOAD), options=RunOptions(baselines=False))
    outcome = result.report.tiers["api"]
    assert outcome.slo_attainment is not None
    return outcome.slo_attainment, outcome.variants, outcome.cost


def test_a_shortage_of_the_tiers_gpu_is_filled_by_its_variants() -> None:
    slo_h100, mix_h100, _ = _run(TIERS)
    slo_mixed, mix, cost = _run(TIERS + VARIANTS)
    assert mix_h100 == {}  # a tier without variants reports no mix
    assert set(mix) == {"H100-SXM5-80GB", "2× L40S-48GB"} and mix["2× L40S-48GB"] > 0
    assert slo_mixed > slo_h100 + 0.05  # the H100-only fleet cannot grow; the variants carry the spike
    assert cost > 0


def test_weighted_least_connections_levels_connections_per_weight() -> None:
    # idle pools: in proportion to weight
    assert weighted_least_connections(np.array([0, 0]), np.array([3.0, 1.0]), 400).tolist() == [300, 100]
    # a backlog on the small pool: it takes less until the others catch up
    assert weighted_least_connections(np.array([0, 50]), np.array([1.0, 1.0]), 60).tolist() == [55, 5]
    # a pool with no ready instance takes none
    assert weighted_least_connections(np.array([5, 0]), np.array([0.0, 2.0]), 7).tolist() == [0, 7]


def test_variants_with_a_closed_loop_load_are_refused_naming_the_workload() -> None:
    sessions = WORKLOAD.replace(
        "    kind: poisson\n    rate: 40\n", "    kind: sessions\n    sessions: 50\n    think_time: [1s, 3s]\n"
    )
    with pytest.raises(SimulationInputError, match=r'w.yaml: tier "api": variants are simulated for open-loop'):
        simulate(parse_config(TIERS + VARIANTS), TIERS, parse_workload(sessions), workload_source="w.yaml",
                 options=RunOptions(baselines=False))  # fmt: skip
