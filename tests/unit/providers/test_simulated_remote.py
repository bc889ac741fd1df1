"""The simulated cloud shared over HTTP: the server in a thread on loopback, the adapter over real httpx."""

from __future__ import annotations

import asyncio
import os
import selectors
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from scalectl.clocks import FakeClock, SystemClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import InstanceNotFound, InsufficientCapacity, InvalidRequest, RateLimited
from scalectl.providers.registry import ADAPTERS, ProviderConfig, build_provider, capabilities_of
from scalectl.providers.simulated import SimulatedCloud
from scalectl.providers.simulated.remote import RemoteSimulatedCloud
from tests.fakes import LoopbackServer
from tests.fakes.simulated_cloud_server import start_simulated_cloud

GPU = "H100-SXM5-80GB"
ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Env:
    cloud: SimulatedCloud
    server: LoopbackServer
    remote: RemoteSimulatedCloud


Factory = Callable[..., Awaitable[Env]]


@pytest.fixture
async def make() -> AsyncIterator[Factory]:
    made: list[Env] = []

    async def factory(**options: float | int) -> Env:
        cloud, server = start_simulated_cloud(provision_delay_min=0.0, provision_delay_max=0.0, **options)
        config = ProviderConfig(name="sim-shared", type="simulated-remote", base_url=server.url)
        remote = build_provider(config, FakeClock())
        assert isinstance(remote, RemoteSimulatedCloud)
        env = Env(cloud, server, remote)
        made.append(env)
        return env

    yield factory
    for env in made:
        await env.remote.aclose()
        env.server.stop()


def spec(offer: Offer, key: str, capacity: Capacity = Capacity.ON_DEMAND) -> LaunchSpec:
    return LaunchSpec(key=key, tier="chat", offer=offer, capacity=capacity, tags={"tier": "chat"})


async def on_demand_offer(remote: RemoteSimulatedCloud) -> Offer:
    offers = await remote.offers(GpuRequest(gpu=GPU, capacity=Capacity.ON_DEMAND, regions=("sim-east",)))
    assert len(offers) == 1
    return offers[0]


def test_registered_with_the_simulated_cloud_s_capabilities_but_no_local_state() -> None:
    assert ADAPTERS["simulated-remote"] == "scalectl.providers.simulated.remote:RemoteSimulatedCloud"
    caps = capabilities_of("simulated-remote")
    assert caps.local_state is None  # the state lives in the server
    assert caps == replace(capabilities_of("simulated"), local_state=None)


def test_base_url_is_required_and_the_error_says_how_to_get_one() -> None:
    with pytest.raises(ValueError, match=r"'shared' \(type simulated-remote\) needs base_url") as info:
        build_provider(ProviderConfig(name="shared", type="simulated-remote"), FakeClock())
    assert "python -m providers.simulated.server" in str(info.value)


def test_unknown_options_are_refused() -> None:
    config = ProviderConfig(name="s", type="simulated-remote", base_url="http://127.0.0.1:1", options={"seed": 7})
    with pytest.raises(ValueError, match="unknown options"):
        build_provider(config, FakeClock())


async def test_create_get_list_delete_round_trip(make: Factory) -> None:
    env = await make()
    offer = await on_demand_offer(env.remote)
    assert offer.provider == "sim-shared" and offer.gpu == GPU and offer.region == "sim-east"
    assert offer.on_demand_per_hour is not None and offer.spot_per_hour is None
    assert offer.available and offer.available_count == env.cloud.options.capacity_per_offer

    made = await env.remote.create(spec(offer, "sc-chat-0001"))
    assert made.provider == "sim-shared" and made.key == "sc-chat-0001"
    assert made.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING)
    assert made.capacity is Capacity.ON_DEMAND and made.gpu == GPU and made.price_per_hour == offer.on_demand_per_hour
    # The same instance the in-process cloud sees, field for field (but for the provider name).
    local = await env.cloud.get(made.provider_id)
    fetched = await env.remote.get(made.provider_id)
    assert fetched == replace(local, provider="sim-shared")
    assert fetched.status is InstanceStatus.RUNNING  # no provisioning delay: running at the next look

    await env.remote.create(spec(offer, "other-0001"))
    listed = await env.remote.list("sc-")
    assert [i.provider_id for i in listed] == [made.provider_id]
    assert len(await env.remote.list("")) == 2

    await env.remote.delete(made.provider_id)
    await env.remote.delete(made.provider_id)  # idempotent: gone is success
    assert (await env.cloud.get(made.provider_id)).status is InstanceStatus.TERMINATED
    assert await env.remote.list("sc-") == []
    with pytest.raises(InstanceNotFound, match="sim-shared"):
        await env.remote.get("sim-999999")


async def test_create_is_idempotent_by_key(make: Factory) -> None:
    env = await make()
    offer = await on_demand_offer(env.remote)
    first = await env.remote.create(spec(offer, "sc-chat-0002"))
    again = await env.remote.create(spec(offer, "sc-chat-0002"))
    assert again.provider_id == first.provider_id
    assert len(await env.remote.list("sc-")) == 1


async def test_spot_offers_and_instances_keep_their_capacity(make: Factory) -> None:
    env = await make()
    offers = await env.remote.offers(GpuRequest(gpu=GPU, capacity=Capacity.SPOT))
    assert {o.region for o in offers} == {"sim-east", "sim-west"}
    assert all(o.spot_per_hour is not None and o.on_demand_per_hour is None for o in offers)
    made = await env.remote.create(spec(offers[0], "sc-batch-0001", Capacity.SPOT))
    assert made.capacity is Capacity.SPOT and made.price_per_hour == offers[0].spot_per_hour
    env.cloud.interrupt(made.provider_id, notice=3600)
    warned = await env.remote.get(made.provider_id)
    assert warned.interruption_notice_at is not None and warned.status is InstanceStatus.RUNNING


async def test_capacity_exhaustion_is_insufficient_capacity(make: Factory) -> None:
    env = await make(capacity_per_offer=1)
    offer = await on_demand_offer(env.remote)
    await env.remote.create(spec(offer, "sc-chat-0003"))
    with pytest.raises(InsufficientCapacity, match="no H100-SXM5-80GB on-demand capacity in sim-east"):
        await env.remote.create(spec(offer, "sc-chat-0004"))
    exhausted = await on_demand_offer(env.remote)
    assert not exhausted.available and exhausted.available_count == 0


async def test_cloud_errors_map_back_to_the_same_types(make: Factory) -> None:
    env = await make()
    offer = await on_demand_offer(env.remote)
    unknown_region = replace(offer, region="mars-1")
    with pytest.raises(InvalidRequest, match="unknown region 'mars-1'"):
        await env.remote.create(spec(unknown_region, "sc-chat-0005"))
    foreign = replace(offer, provider="elsewhere")
    with pytest.raises(InvalidRequest, match="belongs to elsewhere"):
        await env.remote.create(spec(foreign, "sc-chat-0006"))
    env.cloud.fail_next("get", RateLimited("slow down", provider="simulated", retry_after=2.0), times=10)
    with pytest.raises(RateLimited) as info:
        await env.remote.get("sim-000001")  # retried on the adapter's (fake) clock, then given up
    assert info.value.retry_after == 2.0


def test_the_server_answers_json_errors_with_distinct_statuses() -> None:
    _, server = start_simulated_cloud(capacity_per_offer=0)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            missing = http.get("/instances/sim-424242")
            assert missing.status_code == 404
            assert missing.json() == {"error": "instance-not-found", "message": "no instance sim-424242"}
            bad = http.post("/instances", json={"key": "sc-x"})
            assert bad.status_code == 400 and bad.json()["error"] == "invalid-request"
            assert http.post("/offers", content=b"not json").json()["error"] == "invalid-request"
            offer = http.post("/offers", json={"gpu": GPU, "capacity": "on-demand"}).json()[0]
            launch = {"key": "sc-y", "tier": "chat", "offer": offer, "capacity": "on-demand"}  # no server field
            full = http.post("/instances", json=launch)
            assert full.status_code == 409 and full.json()["error"] == "insufficient-capacity"
            assert http.delete("/instances/sim-424242").status_code == 204
    finally:
        server.stop()


async def test_a_listing_of_thousands_comes_back_whole(make: Factory) -> None:
    env = await make()
    offer = await on_demand_offer(env.remote)
    # Filled in-process (same cloud, no request in flight): 2,000 launches over HTTP would only test HTTP.
    for n in range(2000):
        await env.cloud.create(spec(replace(offer, provider="simulated"), f"sc-load-{n:05d}"))
    listed = await env.remote.list("sc-load-")
    assert len(listed) == 2000
    assert {i.key for i in listed} == {f"sc-load-{n:05d}" for n in range(2000)}
    assert all(i.provider == "sim-shared" and i.status is InstanceStatus.RUNNING for i in listed)


async def test_two_adapters_share_one_cloud(make: Factory) -> None:
    env = await make()
    other = RemoteSimulatedCloud(
        ProviderConfig(name="sim-shared", type="simulated-remote", base_url=env.server.url), SystemClock()
    )
    try:
        offer = await on_demand_offer(env.remote)
        made = await env.remote.create(spec(offer, "sc-chat-0007"))
        seen, again = await asyncio.gather(other.list("sc-"), other.create(spec(offer, "sc-chat-0007")))
        assert [i.provider_id for i in seen] == [made.provider_id] and again.provider_id == made.provider_id
    finally:
        await other.aclose()


def _start_process(*args: str) -> tuple[subprocess.Popen[str], str]:
    """The server as a process on a free port; its URL from the line it prints once listening (bounded wait)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalectl.providers.simulated.server", "--host", "127.0.0.1", "--port", "0", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=20):
            proc.kill()
            proc.wait(10)
            pytest.fail("the server printed nothing within 20 s")
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on http://127.0.0.1:"), line
    return proc, line.removeprefix("listening on ")


def _stop_process(proc: subprocess.Popen[str]) -> int:
    proc.terminate()
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise


async def test_the_server_process_prints_its_url_and_keeps_its_state_across_a_restart(tmp_path: Path) -> None:
    state = str(tmp_path / "cloud.json")
    options = ("--seed", "7", "--provision-delay-min", "0", "--provision-delay-max", "0", "--state-path", state)
    proc, url = _start_process(*options)
    try:
        remote = RemoteSimulatedCloud(ProviderConfig(name="s", type="simulated-remote", base_url=url), SystemClock())
        made = await remote.create(spec(await on_demand_offer(remote), "sc-chat-0008"))
        await remote.aclose()
    finally:
        assert _stop_process(proc) == 0  # SIGTERM is a clean stop

    proc, url = _start_process(*options)
    try:
        remote = RemoteSimulatedCloud(ProviderConfig(name="s", type="simulated-remote", base_url=url), SystemClock())
        assert [i.provider_id for i in await remote.list("sc-")] == [made.provider_id]
        await remote.aclose()
    finally:
        assert _stop_process(proc) == 0
