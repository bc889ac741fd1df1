"""Boot paths: what a stop/start costs and saves, against the simulated cloud and the local RunPod and
Vast.ai stand-ins (fake clock, loopback HTTP).

Prints, for the simulated cloud with its default options: seconds from create to running and from start
(after a stop) to running over 200 machines (median, p95), dollars to hold one H100 for an hour running
and stopped, and the share of 2,000 starts refused at ``resume_failure_rate`` 0.1. For RunPod and Vast.ai:
the requests one stop and one start send (the adapter's look-up included).

    .venv/bin/python bench/bench_boot_paths.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec
from scalectl.providers.errors import InsufficientCapacity
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.providers.simulated import SimulatedCloud
from tests.fakes.runpod_server import serve_runpod
from tests.fakes.vastai_server import serve_vast

GPU = "H100-SXM5-80GB"
MACHINES = 200
STARTS = 2_000  # starts drawn for the refusal share (200 would leave it within +-4 points by chance)


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


async def _until_running(cloud: SimulatedCloud, clock: FakeClock, pid: str) -> float:
    began = clock.now()
    while (await cloud.get(pid)).status is not InstanceStatus.RUNNING:
        clock.advance(1.0)
    return clock.now() - began


async def simulated() -> None:
    clock = FakeClock()
    cloud = SimulatedCloud(ProviderConfig("sim", "simulated"), clock)
    offer = (await cloud.offers(GpuRequest(gpu=GPU, capacity=Capacity.ON_DEMAND, regions=("sim-east",))))[0]
    boots, resumes = [], []
    for i in range(MACHINES):
        made = await cloud.create(LaunchSpec(key=f"sct-b{i}", tier="t", offer=offer, capacity=Capacity.ON_DEMAND))
        boots.append(await _until_running(cloud, clock, made.provider_id))
        await cloud.stop(made.provider_id)
        await cloud.start(made.provider_id)
        resumes.append(await _until_running(cloud, clock, made.provider_id))
    print(f"simulated: create -> running  median {statistics.median(boots):6.1f} s  p95 {_p95(boots):6.1f} s")
    print(f"simulated: start  -> running  median {statistics.median(resumes):6.1f} s  p95 {_p95(resumes):6.1f} s")
    hour = SimulatedCloud(ProviderConfig("sim", "simulated"), clock)
    made = await hour.create(LaunchSpec(key="sct-h", tier="t", offer=offer, capacity=Capacity.ON_DEMAND))
    start = hour.billed()
    clock.advance(3600)
    running = hour.billed() - start
    await hour.stop(made.provider_id)
    start = hour.billed()
    clock.advance(3600)
    print(f"simulated: one H100 for an hour: running ${running:.2f}, stopped ${hour.billed() - start:.2f}")
    flaky = SimulatedCloud(ProviderConfig("sim", "simulated", options={"resume_failure_rate": 0.1}), clock)
    refused = 0
    for i in range(STARTS):
        made = await flaky.create(LaunchSpec(key=f"sct-f{i}", tier="t", offer=offer, capacity=Capacity.ON_DEMAND))
        await flaky.stop(made.provider_id)
        try:
            await flaky.start(made.provider_id)
        except InsufficientCapacity:
            refused += 1
    print(f"simulated: resume_failure_rate 0.1: {refused}/{STARTS} starts refused")


async def requests_per_call(kind: str) -> None:
    serve = {"runpod": serve_runpod, "vastai": serve_vast}[kind]
    with serve() as (fake, url):
        os.environ["SCALECTL_BENCH_KEY"] = fake.api_key
        config = ProviderConfig(
            name=kind, type=kind, base_url=url, api_key_env="SCALECTL_BENCH_KEY", options={"default_image": "img:1"}
        )
        provider = build_provider(config, FakeClock())
        offers = await provider.offers(GpuRequest(gpu=GPU, capacity=Capacity.ON_DEMAND))
        made = await provider.create(LaunchSpec(key="sct-r", tier="t", offer=offers[0], capacity=Capacity.ON_DEMAND))
        fake.make_running(made.provider_id)
        before = len(fake.log)
        await provider.stop(made.provider_id)
        stop = len(fake.log) - before
        before = len(fake.log)
        await provider.start(made.provider_id)
        print(f"{kind}: requests per stop {stop}, per start {len(fake.log) - before}")
        await provider.aclose()


async def main() -> None:
    await simulated()
    for kind in ("runpod", "vastai"):
        await requests_per_call(kind)


if __name__ == "__main__":
    asyncio.run(main())
