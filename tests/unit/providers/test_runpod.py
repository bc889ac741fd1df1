"""RunPod adapter specifics, against the local RunPod API over loopback HTTP (the adapter's real network path)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import (
    AuthFailed,
    CreateUnconfirmed,
    InsufficientCapacity,
    InvalidRequest,
    NotSupported,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from scalectl.providers.registry import ADAPTERS, ProviderConfig, build_provider
from scalectl.providers.runpod import RunPodProvider
from scalectl.providers.runpod.wire import graphql_error
from scalectl.sizing.server import ServerDescription
from tests.fakes import Fault
from tests.fakes.runpod_server import RunPodFake, serve_runpod
from tests.fakes.settle import create_settled

KEY_ENV = "SCALECTL_TEST_RUNPOD_UNIT_KEY"
SERVER = ServerDescription(model="meta-llama/Llama-3.1-8B", args=(), image="vllm/vllm-openai:v0.8.5", env={"A": "1"})


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunPodFake, str]]:
    with serve_runpod() as served:
        yield served


@pytest.fixture
def fake(served: tuple[RunPodFake, str], monkeypatch: pytest.MonkeyPatch) -> RunPodFake:
    served[0].reset()
    monkeypatch.setenv(KEY_ENV, served[0].api_key)
    return served[0]


@pytest.fixture
def url(served: tuple[RunPodFake, str]) -> str:
    return served[1]


def make(url: str, clock: FakeClock | None = None, **options: Any) -> RunPodProvider:
    config = ProviderConfig(name="rp", type="runpod", base_url=url, api_key_env=KEY_ENV, options=options)
    return RunPodProvider(config, clock or FakeClock())


@pytest.fixture
async def rp(fake: RunPodFake, url: str) -> AsyncIterator[RunPodProvider]:
    provider = make(url)
    yield provider
    await provider.aclose()


async def offer(provider: RunPodProvider, capacity: Capacity, gpu: str = "H100", count: int = 1) -> Offer:
    offers = await provider.offers(GpuRequest(gpu=gpu, count=count, capacity=capacity))
    assert len(offers) == 1
    return offers[0]


def spec(key: str, offer: Offer, capacity: Capacity, **kw: Any) -> LaunchSpec:
    return LaunchSpec(key=key, tier="batch", offer=offer, capacity=capacity, server=kw.pop("server", SERVER), **kw)


# ---- offers --------------------------------------------------------------------------------------
async def test_offers_price_the_whole_pod_from_per_gpu_prices(rp: RunPodProvider) -> None:
    both = await rp.offers(GpuRequest(gpu="H100-SXM5-80GB", count=2))
    by_capacity = {("spot" if o.spot_per_hour else "od"): o for o in both}
    assert by_capacity["od"].on_demand_per_hour == pytest.approx(2 * 2.69)  # secure cloud, per GPU x 2
    assert by_capacity["spot"].spot_per_hour == pytest.approx(2 * 1.75)
    assert all(o.gpu == "H100-SXM5-80GB" and o.gpu_count == 2 and o.region == "any" for o in both)


async def test_community_cloud_uses_community_prices(fake: RunPodFake, url: str) -> None:
    provider = make(url, cloud="COMMUNITY")
    try:
        od = await offer(provider, Capacity.ON_DEMAND)
    finally:
        await provider.aclose()
    assert od.on_demand_per_hour == pytest.approx(1.99)


async def test_gpu_runpod_does_not_rent_gives_no_offers_and_no_calls(rp: RunPodProvider, fake: RunPodFake) -> None:
    assert await rp.offers(GpuRequest(gpu="A100-40GB-PCIe")) == []
    assert fake.calls == 0


async def test_sold_out_gpu_is_offered_as_unavailable(rp: RunPodProvider, fake: RunPodFake) -> None:
    fake.capacity["NVIDIA H100 80GB HBM3"] = 0
    assert (await offer(rp, Capacity.ON_DEMAND)).available is False


async def test_unknown_region_names_the_data_centers(rp: RunPodProvider) -> None:
    with pytest.raises(InvalidRequest) as info:
        await rp.offers(GpuRequest(gpu="H100", regions=("us-east-1",)))
    assert "us-east-1" in str(info.value) and "EU-RO-1" in str(info.value)


async def test_region_reaches_the_pod(rp: RunPodProvider, fake: RunPodFake) -> None:
    offers = await rp.offers(GpuRequest(gpu="L40S", capacity=Capacity.ON_DEMAND, regions=("EU-RO-1",)))
    assert [o.region for o in offers] == ["EU-RO-1"]
    created = await rp.create(spec("sct-region-1", offers[0], Capacity.ON_DEMAND))
    assert fake.pods[created.provider_id]["dataCenterId"] == "EU-RO-1"
    assert (await rp.get(created.provider_id)).region == "EU-RO-1"


# ---- create: on-demand and spot ------------------------------------------------------------------
async def test_on_demand_pod_carries_image_args_env_ports_and_key(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-od-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    pod = fake.pods[created.provider_id]
    assert pod["name"] == "sct-od-1" and pod["image"] == "vllm/vllm-openai:v0.8.5"
    assert pod["args"] == "--model meta-llama/Llama-3.1-8B"
    assert pod["ports"] == ["8000/tcp"]
    assert pod["env"]["A"] == "1" and pod["env"]["SCALECTL_KEY"] == "sct-od-1"
    assert created.provider_id not in fake.interruptible
    assert created.capacity is Capacity.ON_DEMAND and created.status is InstanceStatus.PENDING


async def test_spot_bids_per_gpu_through_graphql(rp: RunPodProvider, fake: RunPodFake) -> None:
    spot = await offer(rp, Capacity.SPOT, count=2)
    created = await rp.create(spec("sct-spot-1", spot, Capacity.SPOT, bid_per_hour=4.0))
    assert created.provider_id in fake.interruptible
    assert fake.pods[created.provider_id]["cost"] == pytest.approx(4.0)  # 2.0 per GPU x 2
    assert ("POST", "/graphql", "") in fake.log
    assert created.capacity is Capacity.SPOT and created.key == "sct-spot-1"


async def test_spot_without_bid_bids_the_offer_price(rp: RunPodProvider, fake: RunPodFake) -> None:
    spot = await offer(rp, Capacity.SPOT)
    created = await rp.create(spec("sct-spot-2", spot, Capacity.SPOT))
    assert created.price_per_hour == pytest.approx(spot.spot_per_hour)


async def test_bid_below_minimum_is_an_invalid_request(rp: RunPodProvider, fake: RunPodFake) -> None:
    with pytest.raises(InvalidRequest) as info:
        await rp.create(spec("sct-lowbid", await offer(rp, Capacity.SPOT), Capacity.SPOT, bid_per_hour=0.01))
    assert "minimum bid" in str(info.value)
    assert fake.pods == {}


async def test_a_launch_without_image_is_refused_before_any_call(rp: RunPodProvider, fake: RunPodFake) -> None:
    od = await offer(rp, Capacity.ON_DEMAND)
    before = fake.calls
    with pytest.raises(InvalidRequest) as info:
        await rp.create(spec("sct-noimage", od, Capacity.ON_DEMAND, server=None))
    assert "container image" in str(info.value) and "default_image" in str(info.value)
    assert fake.calls == before


async def test_a_lost_create_answer_is_recovered_not_duplicated(rp: RunPodProvider, fake: RunPodFake) -> None:
    fake.lost_creates = 1  # the pod is made, the answer is a 504
    launch = spec("sct-lost-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND)
    with pytest.raises(CreateUnconfirmed):  # not sent again in the same call: the listing may lag behind it
        await rp.create(launch)
    created = await create_settled(rp, launch, rp.clock)
    assert [p["id"] for p in fake.pods.values() if p["name"] == "sct-lost-1"] == [created.provider_id]


async def test_lost_spot_rental_is_recovered_not_duplicated(rp: RunPodProvider, fake: RunPodFake) -> None:
    fake.lost_creates = 1
    launch = spec("sct-lost-2", await offer(rp, Capacity.SPOT), Capacity.SPOT)
    with pytest.raises(CreateUnconfirmed):
        await rp.create(launch)
    created = await create_settled(rp, launch, rp.clock)
    assert [p["id"] for p in fake.pods.values() if p["name"] == "sct-lost-2"] == [created.provider_id]


# ---- statuses, preemption, addresses -------------------------------------------------------------
async def test_preempted_interruptible_pod_reads_preempted(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-pre-1", await offer(rp, Capacity.SPOT), Capacity.SPOT))
    fake.preempt(created.provider_id)
    got = await rp.get(created.provider_id)
    assert got.status is InstanceStatus.PREEMPTED and got.raw_status == "EXITED"


async def test_exited_on_demand_pod_is_stopped_not_gone(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-exit-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.set_raw_status(created.provider_id, "EXITED")
    got = await rp.get(created.provider_id)
    assert got.status is InstanceStatus.STOPPED and not got.status.is_gone


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("PROVISIONING", InstanceStatus.PENDING),
        ("STARTING", InstanceStatus.PENDING),
        ("RUNNING", InstanceStatus.RUNNING),
        ("ERROR", InstanceStatus.FAILED),
        ("HIBERNATING", InstanceStatus.UNKNOWN),
    ],
)
async def test_status_table(rp: RunPodProvider, fake: RunPodFake, raw: str, expected: InstanceStatus) -> None:
    created = await rp.create(spec("sct-status-x", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.set_raw_status(created.provider_id, raw)
    assert (await rp.get(created.provider_id)).status is expected


async def test_running_pod_has_its_public_tcp_address(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-addr-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    assert (await rp.get(created.provider_id)).address is None
    fake.make_running(created.provider_id)
    got = await rp.get(created.provider_id)
    public = next(p["public"] for p in fake.pods[created.provider_id]["runtime"]["ports"] if p["private"] == 8000)
    assert got.address == f"203.0.113.7:{public}"


async def test_http_ports_use_the_runpod_proxy(fake: RunPodFake, url: str) -> None:
    provider = make(url, port_protocol="http")
    try:
        created = await provider.create(
            spec("sct-proxy-1", await offer(provider, Capacity.ON_DEMAND), Capacity.ON_DEMAND)
        )
        fake.make_running(created.provider_id)
        got = await provider.get(created.provider_id)
    finally:
        await provider.aclose()
    assert got.address == f"{created.provider_id}-8000.proxy.runpod.net:443"


async def test_pods_with_missing_and_odd_fields_are_tolerated(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-odd-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    pod = fake.pods[created.provider_id]
    pod.update(gpu=None, cost="not-a-number", createdAt=12, runtime={"ports": "nope"}, status=None)
    got = await rp.get(created.provider_id)
    assert got.status is InstanceStatus.UNKNOWN and got.gpu is None and got.price_per_hour is None


async def test_look_alike_without_our_marker_is_not_ours(rp: RunPodProvider, fake: RunPodFake) -> None:
    impostor = fake.add_foreign(name="sct-impostor-1")
    assert impostor not in {i.provider_id for i in await rp.list("sct-")}


# ---- errors, retries, faults ---------------------------------------------------------------------
async def test_rate_limit_storm_is_bounded_and_reports_retry_after(fake: RunPodFake, url: str) -> None:
    clock = FakeClock()
    provider = make(url, clock)
    fake.faults.add(Fault.RATE_LIMITED, times=50)
    start = clock.now()
    try:
        with pytest.raises(RateLimited) as info:
            await provider.list("sct-")
    finally:
        await provider.aclose()
    assert fake.calls == provider.max_retries + 1
    assert info.value.retry_after == 2.0
    assert clock.now() - start == pytest.approx(2.0 * provider.max_retries)  # waited as told, on the fake clock


async def test_twenty_percent_faults_creates_still_succeed_within_bounded_calls(fake: RunPodFake, url: str) -> None:
    provider = make(url, timeout=0.25)
    fake.timeout_delay = 0.6
    fake.faults.chaos(0.2, seed=7, kinds=(Fault.SERVER_ERROR, Fault.TIMEOUT, Fault.GARBAGE))
    keys = [f"sct-chaos-{i}" for i in range(8)]
    try:
        od = await provider.offers(GpuRequest(gpu="L40S", capacity=Capacity.ON_DEMAND))
        for key in keys:
            await create_settled(provider, spec(key, od[0], Capacity.ON_DEMAND), provider.clock)
    finally:
        await provider.aclose()
        fake.faults.clear()
        fake.timeout_delay = 1.0
    names = [p["name"] for p in fake.pods.values()]
    assert sorted(names) == sorted(keys)  # each exactly once
    attempts = provider.max_retries + 1
    assert fake.calls <= attempts + len(keys) * attempts * (attempts + 1)  # offers + per create lookups/creates


async def test_validation_422_is_invalid_and_not_retried(rp: RunPodProvider, fake: RunPodFake) -> None:
    before = fake.calls
    with pytest.raises(InvalidRequest):
        await rp._http.request("POST", "/v2/pods", json={"name": "x", "image": "i", "bogus": 1})
    assert fake.calls - before == 1


def _failure(status: int, body: Any, path: str = "/v2/pods") -> Any:
    from scalectl.providers.http import HttpFailure

    return HttpFailure(method="POST", path=path, status=status, body=body, retry_after=None)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, {"detail": "There are no longer any instances available with the requested specs"}, InsufficientCapacity),
        (402, {"detail": "Your balance is too low to deploy this pod"}, QuotaExceeded),
        (401, {"title": "Unauthorized"}, AuthFailed),
        (502, "<html>bad gateway</html>", Transient),
        (400, {"detail": "image is required"}, InvalidRequest),
    ],
)  # fmt: skip
def test_rest_error_mapping(rp: RunPodProvider, status: int, body: Any, expected: type) -> None:
    assert type(rp._map_error(_failure(status, body))) is expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("There are no longer any instances available with the requested specifications.", InsufficientCapacity),
        ("Unauthorized request, please check your API key.", AuthFailed),
        ("Your balance is too low", QuotaExceeded),
        ("Too many requests", RateLimited),
        ("Internal server error", Transient),
        ("Something we have never seen", InvalidRequest),
    ],
)
def test_graphql_error_mapping(rp: RunPodProvider, message: str, expected: type) -> None:
    error = graphql_error([{"message": message}], provider=rp.name, credential_hint="RUNPOD_API_KEY", redact=str)
    assert type(error) is expected


# ---- credentials ---------------------------------------------------------------------------------
async def test_missing_key_names_the_env_var(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALECTL_RUNPOD_API_KEY", raising=False)
    provider = RunPodProvider(ProviderConfig(name="rp", type="runpod", base_url=url), FakeClock())
    try:
        with pytest.raises(AuthFailed) as info:
            await provider.list("sct-")
    finally:
        await provider.aclose()
    assert "SCALECTL_RUNPOD_API_KEY" in str(info.value)


async def test_the_key_never_leaks(fake: RunPodFake, url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make(url)
    errors: list[BaseException] = []
    fake.faults.add(Fault.SERVER_ERROR, times=provider.max_retries + 1)
    fake.faults.add(Fault.RATE_LIMITED, times=provider.max_retries + 1)
    for _ in range(2):
        try:
            await provider.list("sct-")
        except Exception as exc:
            errors.append(exc)
    fake.api_key = "rpa_SOMETHINGELSE"  # now ours is refused
    try:
        await provider.offers(GpuRequest(gpu="H100"))
    except Exception as exc:
        errors.append(exc)
    finally:
        fake.api_key = RunPodFake.api_key
        await provider.aclose()
    secret = RunPodFake.api_key
    assert [type(e) for e in errors] == [Transient, RateLimited, AuthFailed]
    assert KEY_ENV in str(errors[-1])
    for text in [*(str(e) for e in errors), *(repr(e) for e in errors), caplog.text, repr(provider)]:
        assert secret not in text
    assert all("api_key" not in query for _m, _p, query in fake.log)


def test_registered() -> None:
    assert ADAPTERS["runpod"] == "scalectl.providers.runpod:RunPodProvider"
    built = build_provider(ProviderConfig(name="rp", type="runpod"), FakeClock())
    assert isinstance(built, RunPodProvider)


def test_unknown_option_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known:"):
        RunPodProvider(ProviderConfig(name="rp", type="runpod", options={"colud": "SECURE"}), FakeClock())


async def test_the_quota_runpod_reports_in_its_ratelimit_headers_is_kept(fake: RunPodFake, url: str) -> None:
    clock = FakeClock()
    fake.quota, fake.clock = (3, 60.0), clock
    provider = make(url, clock)
    try:
        for _ in range(3):
            await provider.list("sct-")
        assert fake.calls == 3
        with pytest.raises(RateLimited) as info:
            await provider.list("sct-")  # the third answer said r=0: the fourth is not sent
        assert fake.calls == 3 and info.value.retryable and info.value.retry_after == pytest.approx(60)
        clock.advance(60)
        await provider.list("sct-")
        assert fake.calls == 4
    finally:
        fake.quota = None
        await provider.aclose()


async def test_list_returns_ours_among_2000_stopped_pods(fake: RunPodFake, rp: RunPodProvider) -> None:
    fake.seed_old(2_000)
    created = await rp.create(spec("sct-many-0001", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    assert [i.provider_id for i in await rp.list("sct-many-")] == [created.provider_id]


async def test_starts_find_the_gpus_taken_at_the_fake_s_rate_with_runpod_s_message(
    rp: RunPodProvider, fake: RunPodFake
) -> None:
    created = await rp.create(spec("sct-resume-1", await offer(rp, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.make_running(created.provider_id)
    fake.resume_no_gpu_rate = 0.25
    refused = 0
    for _ in range(40):
        await rp.stop(created.provider_id)
        assert fake.pods[created.provider_id]["status"] == "EXITED"
        try:
            await rp.start(created.provider_id)
        except InsufficientCapacity as exc:
            refused += 1
            assert "not enough free GPUs" in str(exc)
            assert (await rp.get(created.provider_id)).status is InstanceStatus.STOPPED
        else:
            fake.make_running(created.provider_id)
    assert 4 <= refused <= 18  # 25% of 40, seeded


async def test_interruptible_pods_are_not_stopped(rp: RunPodProvider, fake: RunPodFake) -> None:
    created = await rp.create(spec("sct-nostop-1", await offer(rp, Capacity.SPOT), Capacity.SPOT))
    fake.make_running(created.provider_id)
    with pytest.raises(NotSupported):
        await rp.stop(created.provider_id)
    assert not [c for c in fake.log if c[1].endswith("/stop")]
