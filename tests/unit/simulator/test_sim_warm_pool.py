"""The simulated cloud's stopped machines as a run uses them: a start drawn from the boot model's cached
path, the workload's storage price and refusal rate, the disks' bill apart, and boots counted by path."""

from __future__ import annotations

import asyncio

import pytest

from scalectl.clocks import FakeClock
from scalectl.domain.instance import InstanceEvent
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec
from scalectl.providers.errors import InsufficientCapacity
from scalectl.simulator.boots import Boots, boot_summary
from scalectl.simulator.controller_run import boot_paths
from scalectl.simulator.sim_cloud import simulation_cloud
from scalectl.simulator.workloads.spec import WorkloadError, parse_workload
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

LOAD = "tiers: {chat: {kind: poisson, rate: 2}}\n"
TIERS = tiers_yaml({"chat": tier(min=0, max=3, policy=min_floor(0))})


def _cloud(cloud: str = "") -> tuple[FakeClock, Boots, object]:
    w = parse_workload(LOAD + cloud)
    boots = Boots.of(parse_config(TIERS, "tiers.yaml"), ["chat"], w.cloud)
    clock = FakeClock(0.0)
    sim = simulation_cloud(
        "simulated", clock, w.cloud, 3, boots.for_cloud("simulated"), boots.resume_for_cloud("simulated")
    )
    return clock, boots, sim


async def _made(sim: object) -> str:
    offer = (await sim.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1)))[0]  # type: ignore[attr-defined]
    spec = LaunchSpec(key="sc-chat-1", tier="chat", offer=offer, capacity=Capacity.ON_DEMAND)
    return (await sim.create(spec)).provider_id  # type: ignore[attr-defined]


def test_a_start_skips_the_image_and_the_download_and_serves_after_the_rest() -> None:
    clock, boots, sim = _cloud()
    pid = asyncio.run(_made(sim))
    (cold,) = boots.drawn["chat"]
    clock.set(cold.total + 10)
    assert sim.serving(pid)  # type: ignore[attr-defined]
    asyncio.run(sim.stop(pid))  # type: ignore[attr-defined]
    clock.advance(3600)
    asyncio.run(sim.start(pid))  # type: ignore[attr-defined]
    (warm,) = boots.resumed["chat"]
    assert warm.image_pull == 0 and warm.weights_download == 0 and warm.weights_load > 0
    begun = clock.now()
    clock.set(begun + warm.total - 0.5)
    assert not sim.serving(pid)  # type: ignore[attr-defined]
    clock.set(begun + warm.total)
    assert sim.serving(pid)  # type: ignore[attr-defined]
    storage = sim.storage_by_tier(0.0, clock.now())  # type: ignore[attr-defined]
    assert storage["chat"] == pytest.approx(0.02)  # an hour stopped at the default $0.02


def test_the_workload_sets_the_disks_price_and_the_refused_share() -> None:
    clock, _boots, sim = _cloud("cloud: {storage_per_hour: 0.5, resume_failure_rate: 1}\n")
    pid = asyncio.run(_made(sim))
    clock.set(3000)
    asyncio.run(sim.stop(pid))  # type: ignore[attr-defined]
    with pytest.raises(InsufficientCapacity):
        asyncio.run(sim.start(pid))  # type: ignore[attr-defined]
    clock.advance(7200)
    assert sim.storage_by_tier(0.0, clock.now())["chat"] == pytest.approx(1.0)  # type: ignore[attr-defined]
    with pytest.raises(WorkloadError, match=r"cloud\.resume_failure_rate"):
        parse_workload(LOAD + "cloud: {resume_failure_rate: 2}\n", "w.yaml")


def test_boots_are_counted_by_path_within_the_report() -> None:
    def e(t: float, kind: str) -> InstanceEvent:
        return InstanceEvent(t, "chat", "k", kind, "")

    events = [e(-10, "launched"), e(1, "launched"), e(2, "resuming"), e(3, "resuming"), e(4, "resume-failed"),
              e(5, "resuming"), e(6, "resume-timeout"), e(7, "resuming")]  # fmt: skip
    assert boot_paths(events, 0.0) == {"chat": {"warm": 2, "cold": 1, "resume_failed": 2}}


def test_the_report_gives_each_tiers_resume_beside_its_cold_boot() -> None:
    _clock, boots, _sim = _cloud()
    (entry,) = boot_summary(boots, {"chat": None}).values()
    assert entry["path"] == "cold" and 60 < float(entry["resume_p50_s"]) < float(entry["p50_s"]) / 4
    assert float(entry["resume_p50_s"]) < float(entry["resume_p95_s"])
