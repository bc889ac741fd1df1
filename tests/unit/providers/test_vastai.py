"""Vast.ai adapter specifics, against the local Vast.ai API over loopback HTTP (the adapter's real network path)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import (
    AuthFailed,
    CreateUnconfirmed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from scalectl.providers.http import HttpFailure
from scalectl.providers.registry import ADAPTERS, ProviderConfig, build_provider
from scalectl.providers.vastai import VastAIProvider
from scalectl.sizing.server import ServerDescription
from tests.fakes import Fault
from tests.fakes.settle import create_settled
from tests.fakes.vastai_server import VastFake, serve_vast

KEY_ENV = "SCALECTL_TEST_VASTAI_UNIT_KEY"
SERVER = ServerDescription(model="m", args=(), image="vllm/vllm-openai:v0.8.5", env={"A": "1"}, port=8000)
OURS = {"SCALECTL_KEY": "", "SCALECTL_CAPACITY": "on-demand"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[VastFake, str]]:
    with serve_vast() as served:
        yield served


@pytest.fixture
def fake(served: tuple[VastFake, str], monkeypatch: pytest.MonkeyPatch) -> VastFake:
    served[0].reset()
    monkeypatch.setenv(KEY_ENV, served[0].api_key)
    return served[0]


@pytest.fixture
def url(served: tuple[VastFake, str]) -> str:
    return served[1]


def make(url: str, clock: FakeClock | None = None, **options: Any) -> VastAIProvider:
    config = ProviderConfig(name="vast", type="vastai", base_url=url, api_key_env=KEY_ENV, options=options)
    return VastAIProvider(config, clock or FakeClock())


@pytest.fixture
async def vast(fake: VastFake, url: str) -> AsyncIterator[VastAIProvider]:
    provider = make(url)
    yield provider
    await provider.aclose()


def spec(key: str, offer: Offer, capacity: Capacity, **kw: Any) -> LaunchSpec:
    return LaunchSpec(key=key, tier="batch", offer=offer, capacity=capacity, server=kw.pop("server", SERVER), **kw)


async def cheapest(provider: VastAIProvider, capacity: Capacity, gpu: str = "H100", **kw: Any) -> Offer:
    offers = await provider.offers(GpuRequest(gpu=gpu, capacity=capacity, **kw))
    assert offers
    return offers[0]


def searches(fake: VastFake) -> int:
    return sum(1 for _m, path, _q in fake.log if path == "/api/v0/bundles/")


# ---- offers --------------------------------------------------------------------------------------
async def test_offers_are_machines_cheapest_first(vast: VastAIProvider, fake: VastFake) -> None:
    offers = await vast.offers(GpuRequest(gpu="H100-SXM5-80GB", capacity=Capacity.ON_DEMAND))
    assert [o.on_demand_per_hour for o in offers] == [2.10, 2.25, 2.40]
    assert [o.region for o in offers] == ["US", "SE", "CA"]
    assert all(o.available_count == 1 and o.offer_id.isdigit() for o in offers)


async def test_spot_offers_are_priced_at_the_minimum_bid(vast: VastAIProvider) -> None:
    offers = await vast.offers(GpuRequest(gpu="H100", capacity=Capacity.SPOT))
    assert [o.spot_per_hour for o in offers] == [1.00, 1.10, 1.20]
    assert all(o.on_demand_per_hour is None for o in offers)


async def test_both_capacities_take_two_searches(vast: VastAIProvider, fake: VastFake) -> None:
    offers = await vast.offers(GpuRequest(gpu="L40S"))
    assert {o.price(Capacity.ON_DEMAND) is not None for o in offers} == {True, False}
    assert searches(fake) == 2


async def test_gpu_count_and_memory_pick_the_right_machines(vast: VastAIProvider) -> None:
    two = await vast.offers(GpuRequest(gpu="H100", count=2, capacity=Capacity.ON_DEMAND))
    assert [(o.gpu_count, o.on_demand_per_hour) for o in two] == [(2, 4.30)]
    a100_80 = await vast.offers(GpuRequest(gpu="A100-80GB-PCIe", capacity=Capacity.ON_DEMAND))
    a100_40 = await vast.offers(GpuRequest(gpu="A100-40GB-PCIe", capacity=Capacity.ON_DEMAND))
    assert [o.on_demand_per_hour for o in a100_80] == [1.10]
    assert [o.on_demand_per_hour for o in a100_40] == [0.80]


async def test_regions_are_country_codes(vast: VastAIProvider, fake: VastFake) -> None:
    offers = await vast.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND, regions=("se", "CA")))
    assert sorted(o.region for o in offers) == ["CA", "SE"]
    with pytest.raises(InvalidRequest) as info:
        await vast.offers(GpuRequest(gpu="H100", regions=("us-east-1",)))
    assert "us-east-1" in str(info.value) and "country codes" in str(info.value)


async def test_search_query_is_what_the_cli_sends(vast: VastAIProvider, fake: VastFake) -> None:
    await vast.offers(GpuRequest(gpu="A100-80GB-PCIe", capacity=Capacity.SPOT, regions=("US",)))
    (query,) = fake.queries
    assert query["type"] == "bid" and query["gpu_name"] == {"eq": "A100 PCIE"} and query["num_gpus"] == {"eq": 1}
    assert query["rentable"] == {"eq": True} and query["verified"] == {"eq": True}
    assert query["gpu_ram"] == {"gte": 60_000} and query["geolocation"] == {"in": ["US"]}
    assert query["limit"] <= 64


async def test_unknown_gpu_gives_no_offers_and_no_calls(vast: VastAIProvider, fake: VastFake) -> None:
    assert await vast.offers(GpuRequest(gpu="no-such-gpu")) == []
    assert fake.calls == 0


# ---- create --------------------------------------------------------------------------------------
async def test_rent_carries_image_args_env_ports_label(vast: VastAIProvider, fake: VastFake) -> None:
    created = await vast.create(spec("sct-rent-1", await cheapest(vast, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    row = fake.instances[int(created.provider_id)]
    env = dict(row["extra_env"])
    assert row["label"] == "sct-rent-1" and row["image_uuid"] == "vllm/vllm-openai:v0.8.5"
    assert row["image_args"] == ["--model", "m"] and row["image_runtype"] == "args"
    assert env["A"] == "1" and env["-p 8000:8000"] == "1" and env["SCALECTL_KEY"] == "sct-rent-1"
    assert created.status is InstanceStatus.PENDING and created.price_per_hour == 2.10


async def test_spot_rent_sends_the_bid(vast: VastAIProvider, fake: VastFake) -> None:
    spot = await cheapest(vast, Capacity.SPOT)
    created = await vast.create(spec("sct-bid-1", spot, Capacity.SPOT, bid_per_hour=1.5))
    assert fake.instances[int(created.provider_id)]["dph_total"] == 1.5
    assert created.capacity is Capacity.SPOT and created.price_per_hour == 1.5


async def test_gone_offer_is_insufficient_capacity_so_placement_moves_on(vast: VastAIProvider, fake: VastFake) -> None:
    first, second = (await vast.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND)))[:2]
    await vast.create(spec("sct-taker-1", first, Capacity.ON_DEMAND))  # someone (us) took it
    with pytest.raises(InsufficientCapacity):
        await vast.create(spec("sct-late-1", first, Capacity.ON_DEMAND))
    assert (await vast.create(spec("sct-late-1", second, Capacity.ON_DEMAND))).key == "sct-late-1"


async def test_unknown_ask_is_insufficient_capacity(vast: VastAIProvider, fake: VastFake) -> None:
    offer = await cheapest(vast, Capacity.ON_DEMAND)
    ghost = Offer(**{**{f: getattr(offer, f) for f in offer.__slots__}, "offer_id": "999"})
    with pytest.raises(InsufficientCapacity):
        await vast.create(spec("sct-ghost-1", ghost, Capacity.ON_DEMAND))


async def test_a_launch_without_image_is_refused(vast: VastAIProvider, fake: VastFake) -> None:
    offer = await cheapest(vast, Capacity.ON_DEMAND)
    before = fake.calls
    with pytest.raises(InvalidRequest, match="container image"):
        await vast.create(spec("sct-ci-1", offer, Capacity.ON_DEMAND, server=None))
    assert fake.calls == before


async def test_a_lost_rent_answer_is_recovered_not_duplicated(vast: VastAIProvider, fake: VastFake) -> None:
    fake.lost_rents = 1
    offers = await vast.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND))
    launch = spec("sct-lost-1", offers[0], Capacity.ON_DEMAND)
    with pytest.raises(CreateUnconfirmed):  # not sent again in the same call: the listing may lag behind it
        await vast.create(launch)
    created = await create_settled(vast, launch, vast.clock)
    assert [str(i) for i, r in fake.instances.items() if r["label"] == "sct-lost-1"] == [created.provider_id]


# ---- list, get, delete ---------------------------------------------------------------------------
async def test_list_follows_pages(vast: VastAIProvider, fake: VastFake) -> None:
    ids = {fake.add_instance(f"sct-page-{i}", {**OURS, "SCALECTL_KEY": f"sct-page-{i}"}) for i in range(60)}
    fake.add_instance("sct-nomarker-1", {})  # a look-alike that is not ours
    listed = await vast.list("sct-page-")
    assert {i.provider_id for i in listed} == ids
    pages = [parse_qs(q) for _m, path, q in fake.log if path == "/api/v1/instances/"]
    assert len(pages) == 3 and "after_token" not in pages[0] and all("after_token" in p for p in pages[1:])


async def test_get_unknown_is_not_found(vast: VastAIProvider, fake: VastFake) -> None:
    with pytest.raises(InstanceNotFound):
        await vast.get("424242")  # Vast answers {"instances": null}
    calls = fake.calls
    with pytest.raises(InstanceNotFound):
        await vast.get("not-a-number")
    assert fake.calls == calls


async def test_delete_twice_and_unknown_are_fine(vast: VastAIProvider, fake: VastFake) -> None:
    created = await vast.create(spec("sct-del-1", await cheapest(vast, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    await vast.delete(created.provider_id)
    await vast.delete(created.provider_id)  # 404 no_such_instance: success
    await vast.delete("77777777")
    assert int(created.provider_id) not in fake.instances


# ---- statuses and addresses ----------------------------------------------------------------------
async def test_outbid_interruptible_instance_is_preempted(vast: VastAIProvider, fake: VastFake) -> None:
    created = await vast.create(spec("sct-outbid-1", await cheapest(vast, Capacity.SPOT), Capacity.SPOT))
    fake.make_running(created.provider_id)
    assert (await vast.get(created.provider_id)).status is InstanceStatus.RUNNING
    fake.outbid(created.provider_id)
    assert (await vast.get(created.provider_id)).status is InstanceStatus.PREEMPTED


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (None, InstanceStatus.PENDING),
        ("loading", InstanceStatus.PENDING),
        ("running", InstanceStatus.RUNNING),
        ("exited", InstanceStatus.FAILED),
        ("stopped", InstanceStatus.UNKNOWN),  # stopped while intended to run: not documented
        ("scheduling", InstanceStatus.PENDING),  # a start waiting for its machine's GPUs
        ("offline", InstanceStatus.UNKNOWN),
        ("frozen", InstanceStatus.UNKNOWN),
    ],
)
async def test_on_demand_status_table(
    vast: VastAIProvider, fake: VastFake, actual: str | None, expected: InstanceStatus
) -> None:
    created = await vast.create(spec("sct-st-1", await cheapest(vast, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.instances[int(created.provider_id)]["actual_status"] = actual
    assert (await vast.get(created.provider_id)).status is expected


@pytest.mark.parametrize("capacity", [Capacity.ON_DEMAND, Capacity.SPOT])
async def test_an_instance_stopped_on_request_is_stopped_not_preempted(
    vast: VastAIProvider, fake: VastFake, capacity: Capacity
) -> None:
    created = await vast.create(spec("sct-stop-1", await cheapest(vast, capacity), capacity))
    fake.make_running(created.provider_id)
    await vast.stop(created.provider_id)
    row = fake.instances[int(created.provider_id)]
    assert (row["actual_status"], row["intended_status"]) == ("stopped", "stopped")
    assert (await vast.get(created.provider_id)).status is InstanceStatus.STOPPED


async def test_running_instance_has_its_mapped_port(vast: VastAIProvider, fake: VastFake) -> None:
    created = await vast.create(spec("sct-addr-1", await cheapest(vast, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.make_running(created.provider_id)
    got = await vast.get(created.provider_id)
    assert got.address == "198.51.100.23:41000"
    assert got.gpu == "H100-SXM5-80GB" and got.region == "US" and got.created_at is not None


# ---- faults --------------------------------------------------------------------------------------
async def test_rate_limit_storm_is_bounded_with_a_retry_after(fake: VastFake, url: str) -> None:
    clock = FakeClock()
    provider = make(url, clock, rate_limit_wait=3.0)
    fake.faults.add(Fault.RATE_LIMITED, times=40)
    start = clock.now()
    try:
        with pytest.raises(RateLimited) as info:
            await provider.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND))
    finally:
        await provider.aclose()
    assert fake.calls == provider.max_retries + 1
    # Vast sends no Retry-After; its text names the endpoint's threshold (1 s here), which beats the
    # configured wait (3 s), used when the text names none.
    assert info.value.retry_after == 1.0
    assert clock.now() - start == pytest.approx(1.0 * provider.max_retries)


async def test_twenty_percent_faults_creates_still_succeed_within_bounded_calls(fake: VastFake, url: str) -> None:
    provider = make(url, timeout=0.25)
    fake.timeout_delay = 0.6
    keys = [f"sct-chaos-{i}" for i in range(6)]
    try:
        offers = await provider.offers(GpuRequest(gpu="H100", capacity=Capacity.SPOT))
        offers += await provider.offers(GpuRequest(gpu="RTX4090", capacity=Capacity.SPOT))
        offers += await provider.offers(GpuRequest(gpu="L40S", capacity=Capacity.SPOT))
        fake.log.clear()
        fake.faults.chaos(0.2, seed=11, kinds=(Fault.SERVER_ERROR, Fault.TIMEOUT, Fault.GARBAGE, Fault.RATE_LIMITED))
        for key, offer in zip(keys, offers, strict=False):
            await create_settled(provider, spec(key, offer, Capacity.SPOT), provider.clock)
    finally:
        await provider.aclose()
        fake.faults.clear()
        fake.timeout_delay = 1.0
    assert sorted(r["label"] for r in fake.instances.values()) == sorted(keys)  # each exactly once
    attempts = provider.max_retries + 1
    assert fake.calls <= len(keys) * attempts * (attempts + 1)


@pytest.mark.parametrize(
    ("status", "body", "path", "expected"),
    [
        (410, {"error": "no_such_ask", "msg": "not available"}, "/api/v0/asks/1/", InsufficientCapacity),
        (400, {"error": "insufficient_credit", "msg": "add credit"}, "/api/v0/asks/1/", QuotaExceeded),
        (401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}, "/api/v1/instances/", AuthFailed),
        (404, {"success": False, "error": "no_such_instance"}, "/api/v0/instances/5/", InstanceNotFound),
        (502, "<html>502 Bad Gateway</html>", "/api/v1/instances/", Transient),
        (400, {"success": False, "error": "invalid_args", "msg": "bad image"}, "/api/v0/asks/1/", InvalidRequest),
    ],
)  # fmt: skip
def test_error_mapping(vast: VastAIProvider, status: int, body: Any, path: str, expected: type) -> None:
    error = vast._map_error(HttpFailure(method="PUT", path=path, status=status, body=body, retry_after=None))
    assert type(error) is expected


# ---- credentials ---------------------------------------------------------------------------------
async def test_missing_key_names_the_env_var(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALECTL_VASTAI_API_KEY", raising=False)
    provider = VastAIProvider(ProviderConfig(name="vast", type="vastai", base_url=url), FakeClock())
    try:
        with pytest.raises(AuthFailed, match="SCALECTL_VASTAI_API_KEY"):
            await provider.list("sct-")
    finally:
        await provider.aclose()


async def test_key_file_is_read(fake: VastFake, url: str, tmp_path: Any) -> None:
    keyfile = tmp_path / "vast.key"
    keyfile.write_text(fake.api_key + "\n")
    config = ProviderConfig(name="vast", type="vastai", base_url=url, api_key_file=str(keyfile))
    provider = VastAIProvider(config, FakeClock())
    try:
        assert await provider.list("sct-") == []
    finally:
        await provider.aclose()


async def test_the_key_never_leaks(fake: VastFake, url: str, caplog: pytest.LogCaptureFixture) -> None:
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
    fake.api_key = "f" * 64
    try:
        await provider.offers(GpuRequest(gpu="H100"))
    except Exception as exc:
        errors.append(exc)
    finally:
        fake.api_key = VastFake.api_key
        await provider.aclose()
    assert [type(e) for e in errors] == [Transient, RateLimited, AuthFailed]
    assert KEY_ENV in str(errors[-1])
    for text in [*(str(e) for e in errors), *(repr(e) for e in errors), caplog.text, repr(provider)]:
        assert VastFake.api_key not in text
    assert all("api_key" not in query for _m, _p, query in fake.log)  # header only, never the URL


def test_registered_and_documented_api_root_accepted() -> None:
    assert ADAPTERS["vastai"] == "scalectl.providers.vastai:VastAIProvider"
    built = build_provider(
        ProviderConfig(name="v", type="vastai", base_url="https://console.vast.ai/api/v0/"), FakeClock()
    )
    assert isinstance(built, VastAIProvider)
    assert str(built._http._client.base_url).rstrip("/") == "https://console.vast.ai"


async def test_list_pages_are_spaced_by_the_threshold_vast_names_in_its_429(fake: VastFake, url: str) -> None:
    clock = FakeClock()
    fake.min_interval, fake.clock = 1.5, clock
    fake.seed_old(120)  # five pages of 25
    provider = make(url, clock)
    try:
        assert await provider.list("sct-") == []
        first = fake.calls  # page 1, page 2 refused (429, threshold=1.5), then five pages spaced 1.5 s apart
        assert first == 2 + 5
        clock.advance(10)
        assert await provider.list("sct-") == []
        assert fake.calls - first == 5  # paced from the start: no 429
    finally:
        await provider.aclose()


async def test_starts_wait_in_scheduling_at_the_fake_s_rate(vast: VastAIProvider, fake: VastFake) -> None:
    created = await vast.create(spec("sct-resume-1", await cheapest(vast, Capacity.ON_DEMAND), Capacity.ON_DEMAND))
    fake.make_running(created.provider_id)
    fake.resume_no_gpu_rate = 0.25
    stalled = 0
    for _ in range(40):
        await vast.stop(created.provider_id)
        await vast.start(created.provider_id)  # answers success either way, as Vast.ai does
        got = await vast.get(created.provider_id)
        assert got.status is InstanceStatus.PENDING
        stalled += got.raw_status.startswith("scheduling")
        fake.make_running(created.provider_id)
    assert 4 <= stalled <= 18  # 25% of 40, seeded
