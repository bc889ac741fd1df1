"""A steady start: a run opens on a fleet sized for its opening traffic, unless the workload says cold."""

from __future__ import annotations

import numpy as np
import pytest

from scalectl.simulator.controller_run import RunOptions, SimulationResult, simulate
from scalectl.simulator.workloads.opening import steady_warmup_s
from scalectl.simulator.workloads.spec import WorkloadError, parse_workload
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  api:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 20
    policy: {kind: min-floor, ttft_max: 500ms}
"""

# Opens at its day level: ~4 instances' worth of traffic from the first second.
WORKLOAD = """
seed: 5
start: "2026-03-16T10:00:00-04:00"
duration: 10m
tiers:
  api:
    kind: poisson
    rate: 100
    input_tokens: {mean: 1500, cv: 0.6, max: 3000}  # prompt + output within max_model_len (4,096): none refused
    output_tokens: {mean: 250, cv: 0.6, max: 1000}
    ttft_target: 500ms
cloud: {provision_delay: [2m, 5m]}   # the opening it measures is sized for a boot of at most 5 minutes
"""


def run(start: str | None) -> SimulationResult:
    text = WORKLOAD if start is None else WORKLOAD + f"warmup: {start}\n"
    return simulate(parse_config(TIERS), TIERS, parse_workload(text), options=RunOptions(baselines=False))


@pytest.fixture(scope="module")
def steady() -> SimulationResult:
    return run(None)  # the default


@pytest.fixture(scope="module")
def cold() -> SimulationResult:
    return run("cold")


def test_a_steady_start_has_no_boot_misses(steady: SimulationResult, cold: SimulationResult) -> None:
    warm, chilly = steady.report.tiers["api"], cold.report.tiers["api"]
    # Cold: one instance at t = 0 under four instances' traffic until the boot: a large share missed.
    assert chilly.slo_attainment is not None and chilly.slo_attainment < 0.9
    # Steady: the fleet served the opening rate before t = 0, so it opens sized for it.
    assert warm.slo_attainment is not None and warm.slo_attainment > 0.995
    assert warm.peak_instances >= 3
    # The same requests are judged either way: the warm-up's are not in the report.
    assert warm.requests == chilly.requests
    assert warm.rejected_too_long == chilly.rejected_too_long == 0


def test_the_warm_up_is_not_billed(steady: SimulationResult) -> None:
    assert steady.billed_with_warmup > steady.billed > 0
    # Ten minutes of the fleet the warm-up left, no more: 3-5 H100s at $2.40-4.41 an hour.
    assert steady.report.tiers["api"].cost == pytest.approx(steady.billed)


def test_warmup_length_and_field() -> None:
    w = parse_workload(WORKLOAD)
    assert w.warmup == "steady"
    assert steady_warmup_s(w, 5.0, 300.0) == 300.0 + 900.0  # the longest boot and the settling time, in ticks
    assert steady_warmup_s(w.model_copy(update={"warmup": "cold"}), 5.0, 300.0) == 0.0
    with pytest.raises(WorkloadError, match=r"w.yaml: warmup: Input should be 'steady' or 'cold'"):
        parse_workload(WORKLOAD + "warmup: hot\n", "w.yaml")
    with pytest.raises(WorkloadError, match=r"tier \"c\": replication: Input should be 'independent' or 'clumped'"):
        parse_workload("tiers: {c: {kind: trace, path: x.csv, replication: copies}}", "w.yaml")
    assert np.isfinite(steady_warmup_s(w, 7.0, 300.0))
