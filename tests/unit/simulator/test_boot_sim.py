"""The boot model in the simulator: workload overrides (refused with a clear message when wrong), boots
drawn per instance in two phases, and ``provision_delay`` still replacing the model when given."""

from __future__ import annotations

import asyncio
import random

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec
from scalectl.simulator.boots import Boots, timeout_warnings
from scalectl.simulator.controller_run import RunOptions, SimulationInputError, simulate
from scalectl.simulator.sim_cloud import PhasedSimulatedCloud, simulation_cloud
from scalectl.simulator.workloads.spec import WorkloadError, parse_workload
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

LOAD = "tiers: {chat: {kind: poisson, rate: 2}}\n"
TIERS = tiers_yaml(
    {
        "chat": tier(min=1, max=3, policy=min_floor(1)),
        "big": tier(min=0, max=2, gpu_count=2, serving={"model": "meta-llama/Llama-3.1-70B-Instruct",
                                                         "weights_dtype": "fp16", "max_model_len": 4096}),
    }
)  # fmt: skip


@pytest.mark.parametrize(
    "cloud, message",
    [
        ("{boot: {download_mb_s: [0, 500]}}", r"w\.yaml: cloud\.boot\.download_mb_s: expected \[min, max\] in MB/s "
                                              r"with 0 < min <= max, got \[0, 500\]; e\.g\. \[25, 100\]"),
        ("{boot: {load_mb_s: -5}}", r"w\.yaml: cloud\.boot\.load_mb_s: expected \[min, max\] in MB/s"),
        ("{boot: {compile: [2m, 30s]}}", r"w\.yaml: cloud\.boot\.compile: expected \[min, max\] in seconds with "
                                         r"0 < min <= max, got \[120, 30\]"),
        ("{boot: {warmup: 0s}}", r"w\.yaml: cloud\.boot\.warmup: expected \[min, max\] in seconds"),
        ("{boot: {image_gb: 0}}", r"w\.yaml: cloud\.boot\.image_gb: expected the image size in GB, above 0"),
        ("{boot: {path: warm}}", r"w\.yaml: cloud\.boot\.path: Input should be 'cold' or 'cached'"),
        ("{boot: {pull_bandwidth: [1, 2]}}", r"w\.yaml: cloud\.boot\.pull_bandwidth: unknown field"),
        ("{provision_delay: 2m, boot: {path: cached}}", r"w\.yaml: cloud: `provision_delay` replaces the boot model "
                                                        r"that `boot` configures; remove one of them"),
    ],
)  # fmt: skip
def test_bad_boot_overrides_are_refused_naming_file_field_and_fix(cloud: str, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        parse_workload(LOAD + f"cloud: {cloud}\n", "w.yaml")


def test_overrides_replace_the_figures_they_name() -> None:
    w = parse_workload(LOAD + "cloud: {boot: {path: cached, provision: 1m, load_mb_s: 125, warmup: [10s, 20s]}}")
    figures = w.cloud.boot.figures()
    assert w.cloud.boot.path == "cached" and w.cloud.boot.provision_span() is not None
    assert (figures.load_bandwidth.low, figures.load_bandwidth.high) == (125e6, 125e6)
    assert (figures.warmup.low, figures.warmup.high) == (10.0, 20.0)
    assert figures.pull_bandwidth.low == 25e6  # the rest stay at their documented defaults


def _boots(cloud: str = "") -> Boots:
    config = parse_config(TIERS, "tiers.yaml")
    w = parse_workload(LOAD + cloud)
    return Boots.of(config, ["chat", "big"], w.cloud)


def test_each_tier_boots_by_its_model_the_70b_slower() -> None:
    boots = _boots()
    chat, big = boots.tier("chat"), boots.tier("big")
    assert chat.model is not None and big.model is not None
    assert big.mean_s() > chat.mean_s()
    assert boots.longest_s() == big.model.longest()


def test_provision_delay_replaces_the_model_as_before() -> None:
    boots = _boots("cloud: {provision_delay: [2m, 4m]}\n")
    assert boots.for_cloud("simulated") is None and boots.longest_s() == 240.0
    assert boots.tier("big").mean_s() == 180.0
    assert 120.0 <= boots.tier("chat").draw_s(random.Random(1)) <= 240.0
    spec = parse_workload(LOAD + "cloud: {provision_delay: 3m}").cloud
    cloud = simulation_cloud("simulated", FakeClock(0.0), spec, 1)
    assert not isinstance(cloud, PhasedSimulatedCloud)


def test_a_simulated_instance_runs_after_provisioning_and_serves_after_its_whole_boot() -> None:
    boots = _boots("cloud: {boot: {provision: 1m}}\n")
    clock = FakeClock(0.0)
    cloud = simulation_cloud("simulated", clock, boots.spec, 5, boots.for_cloud("simulated"))
    assert not cloud.capabilities.running_means_ready  # the reconciler waits for the server, as in production

    async def launch() -> str:
        offer = (await cloud.offers(GpuRequest(gpu="H100-SXM5-80GB", count=2)))[0]
        made = await cloud.create(LaunchSpec(key="sc-big-1", tier="big", offer=offer, capacity=Capacity.ON_DEMAND))
        return made.provider_id

    pid = asyncio.run(launch())
    (drawn,) = boots.drawn["big"]
    assert drawn.provision == 60.0 and drawn.weights_download > 0
    clock.set(59.0)
    assert asyncio.run(cloud.get(pid)).status is not InstanceStatus.RUNNING
    clock.set(60.0)
    assert asyncio.run(cloud.get(pid)).status is InstanceStatus.RUNNING and not cloud.serving(pid)
    clock.set(drawn.total - 0.5)
    assert not cloud.serving(pid)
    clock.set(drawn.total)
    assert cloud.serving(pid)


def test_an_unknown_model_is_refused_before_the_run() -> None:
    tiers = tiers_yaml({"chat": tier(min=1, max=2, policy=min_floor(1), serving={"model": "acme/nothing-7b"})})
    with pytest.raises(SimulationInputError, match=r'tier "chat"'):
        simulate(parse_config(tiers, "t.yaml"), tiers, parse_workload(LOAD), options=RunOptions(baselines=False))


def test_a_run_records_each_boot_in_its_phases() -> None:
    tiers = tiers_yaml({"chat": tier(min=1, max=2, policy=min_floor(1))})
    w = parse_workload("duration: 10m\n" + LOAD + "cloud: {boot: {path: cached}}\n")
    result = simulate(parse_config(tiers, "t.yaml"), tiers, w, options=RunOptions(baselines=False))
    assert result.store is not None
    ready = [e for e in result.store.records.events(limit=100) if e.kind == "ready"]
    assert ready and all("create→running" in e.message and "running→serving" in e.message for e in ready)
    (row,) = [r for r in result.store.reads.instances(include_ended=True, limit=100) if r.tier == "chat"]
    assert row.running_at is not None and row.ready_at is not None and row.ready_at > row.running_at
    summary = result.report.boots["chat"]
    assert summary["path"] == "cached" and summary["drawn"] == 1
    assert summary["p50_s"] < summary["p95_s"]


def test_boots_past_a_tiers_timeouts_are_a_warning() -> None:
    config = parse_config(TIERS, "tiers.yaml")
    cold = Boots.of(config, ["chat", "big"], parse_workload(LOAD).cloud)
    (line,) = timeout_warnings(cold, config, {"chat": None, "big": None})
    assert line.startswith("tier big: its boot's p95 (24.1 min, cold path) is past its bootstrap_timeout (15 min)")
    cached = Boots.of(config, ["chat", "big"], parse_workload(LOAD + "cloud: {boot: {path: cached}}").cloud)
    assert timeout_warnings(cached, config, {"chat": None, "big": None}) == []
