"""Spheron adapter specifics, against the local Spheron API over real loopback HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import (
    AuthFailed,
    DeleteDeferred,
    InsufficientCapacity,
    InvalidRequest,
    ListingIncomplete,
    ProviderError,
    RateLimited,
)
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.providers.spheron import OfferRef, SpheronProvider, cloud_init_payload
from scalectl.serving.bootstrap import parts
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.sizing.server import ServerDescription
from tests.fakes import Fault, LoopbackServer
from tests.fakes.settle import create_settled
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, FakeSpheron, start_fake_spheron

ENV = "SCALECTL_SPHERON_API_KEY"


@dataclass
class Env:
    clock: FakeClock
    fake: FakeSpheron
    server: LoopbackServer
    provider: SpheronProvider


Factory = Callable[..., Awaitable[Env]]


@pytest.fixture
async def make(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv(ENV, API_KEY)
    made: list[Env] = []

    async def factory(*, fake_kwargs: dict[str, Any] | None = None, **options: Any) -> Env:
        clock = FakeClock()
        fake, server = start_fake_spheron(clock, **(fake_kwargs or {}))
        opts = {"team_id": TEAM_ID, "ssh_key_id": SSH_KEY_ID, **options}
        config = ProviderConfig(name="sph", type="spheron", base_url=server.url, options=opts)
        env = Env(clock, fake, server, SpheronProvider(config, clock))
        made.append(env)
        return env

    yield factory
    for env in made:
        await env.provider.aclose()
        env.server.stop()


async def first_offer(env: Env, capacity: Capacity = Capacity.ON_DEMAND, gpu: str = "H100-SXM5-80GB") -> Offer:
    offers = await env.provider.offers(GpuRequest(gpu=gpu, capacity=capacity))
    assert offers
    return offers[0]


def spec(key: str, offer: Offer, capacity: Capacity = Capacity.ON_DEMAND, **kw: Any) -> LaunchSpec:
    return LaunchSpec(key=key, tier="batch", offer=offer, capacity=capacity, **kw)


# ---- offers ------------------------------------------------------------------------------------------
async def test_offers_follow_pagination_and_price_the_whole_offer(make: Factory) -> None:
    env = await make(page_size=1)
    eight = await env.provider.offers(GpuRequest(gpu="H100-SXM5-80GB", count=8))
    pages = [p for m, p in env.fake.requests if p == "/api/gpu-offers"]
    assert len(pages) == 4 + 2  # four groups in the default view and two under instanceType=SPOT, one a page
    assert {o.region for o in eight} == {"FIN-01", "FIN-02"}
    assert all(o.on_demand_per_hour == 19.20 and o.gpu_count == 8 for o in eight)
    # offers on a later page are found too (RTX 4090 is the third group)
    assert await env.provider.offers(GpuRequest(gpu="RTX 4090", count=1))


async def test_spot_offers_carry_the_spot_price_only(make: Factory) -> None:
    env = await make()
    spot = await env.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.SPOT))
    assert spot and all(o.spot_per_hour == 0.99 and o.on_demand_per_hour is None for o in spot)
    assert {o.region for o in spot} == {"us-east-1", "eu-west-1"}
    both = await env.provider.offers(GpuRequest(gpu="H100"))
    assert {o.price(Capacity.SPOT) is not None for o in both} == {True, False}


async def test_offers_skip_what_cannot_run_our_bootstrap(make: Factory) -> None:
    env = await make()
    ids = {OfferRef.decode(o.offer_id, provider="sph").offer_id for o in await env.provider.offers(GpuRequest("H100"))}
    assert "ses-h100-sxm5-1x" not in ids  # supportsCloudInit: false
    env2 = await make(require_cloud_init=False)
    ids2 = {
        OfferRef.decode(o.offer_id, provider="sph").offer_id for o in await env2.provider.offers(GpuRequest("H100"))
    }
    assert "ses-h100-sxm5-1x" in ids2


async def test_operating_system_and_upstream_provider_options_filter(make: Factory) -> None:
    env = await make(operating_system="Ubuntu Server 22.04")
    assert [o.gpu for o in await env.provider.offers(GpuRequest("A100-80GB-PCIe"))] == ["A100-80GB-PCIe"]
    assert await env.provider.offers(GpuRequest("H100")) == []  # no H100 offer lists that image
    env2 = await make(provider="data-crunch")
    assert {o.gpu_count for o in await env2.provider.offers(GpuRequest("H100", count=8))} == {8}
    assert await env2.provider.offers(GpuRequest("H100", count=1)) == []


async def test_unknown_gpu_and_unknown_region(make: Factory) -> None:
    env = await make()
    assert await env.provider.offers(GpuRequest(gpu="GH200")) == []  # listed by Spheron, not in our catalogue
    with pytest.raises(InvalidRequest) as info:
        await env.provider.offers(GpuRequest(gpu="H100", regions=("mars-1",)))
    assert "mars-1" in str(info.value) and "us-dallas-1" in str(info.value)


# ---- create --------------------------------------------------------------------------------------------
async def test_create_builds_the_deployment_from_one_offer(make: Factory) -> None:
    env = await make()
    offer = await first_offer(env)
    server = ServerDescription(model="meta-llama/Llama-3.1-8B", args=("--port", "8000"))
    inst = await env.provider.create(spec("sct-web-0001", offer, server=server))
    body = env.fake.create_bodies[-1]
    assert body["name"] == "sct-web-0001" and body["teamId"] == TEAM_ID and body["sshKeyId"] == SSH_KEY_ID
    assert (body["provider"], body["offerId"], body["gpuType"], body["gpuCount"]) == (
        "voltage-park",
        "vp-h100-sxm5-1x",
        "H100-SXM5",
        1,
    )
    assert body["region"] == offer.region and body["instanceType"] == "DEDICATED"
    assert body["operatingSystem"] == "Ubuntu 22.04 CUDA 12.4"  # a CUDA image preferred when not configured
    # The server description, rendered straight into Spheron's structured cloudInit (no user-data text).
    files = {f["path"]: f for f in body["cloudInit"]["writeFiles"]}
    assert files[parts.ENV_FILE]["content"] == parts.env_file(server)
    unit = files["/etc/systemd/system/scalectl-vllm.service"]
    assert unit["content"] == parts.systemd_unit(server) and unit["permissions"] == "0644"
    assert "serve meta-llama/Llama-3.1-8B --port 8000" in unit["content"]
    assert body["cloudInit"]["runcmd"][-1] == "systemctl enable --now scalectl-vllm.service"
    assert inst.status is InstanceStatus.PENDING and inst.key == "sct-web-0001"
    assert inst.address is None  # the IP exists while deploying, but readiness is the status
    env.fake.make_running(inst.provider_id)
    running = await env.provider.get(inst.provider_id)
    assert running.status is InstanceStatus.RUNNING and running.address and running.address.endswith(":8000")


def test_cloud_config_is_translated_and_unsupported_keys_refused() -> None:
    doc = {"packages": ["jq"], "write_files": [{"path": "/etc/x", "content": "hi"}], "runcmd": [["echo", "ok"]]}
    ci = cloud_init_payload(CloudConfig(doc), provider="spheron")
    assert ci == {"packages": ["jq"], "writeFiles": [{"path": "/etc/x", "content": "hi"}], "runcmd": ["echo ok"]}
    with pytest.raises(InvalidRequest, match="users"):
        cloud_init_payload(CloudConfig({"users": [], "runcmd": [["echo", "ok"]]}), provider="spheron")


@pytest.mark.parametrize("team", [None, "", "  "])
def test_a_missing_team_id_fails_the_configuration_naming_file_field_and_fix(team: str | None) -> None:
    from scalectl.tiers.config import ConfigError, parse_config

    options = {"ssh_key_id": SSH_KEY_ID} if team is None else {"ssh_key_id": SSH_KEY_ID, "team_id": team}
    text = yaml.safe_dump(
        {
            "providers": {"sph": {"type": "spheron", "options": options}},
            "tiers": {"web": {"capacity": "spot", "gpu": "H100", "providers": ["sph"]}},
        }
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, "tiers.yaml")
    message = str(info.value)
    assert message.startswith("tiers.yaml: ") and 'provider "sph"' in message
    assert "options.team_id is required" in message and "GET /api/balance" in message


async def test_a_missing_team_id_fails_building_the_adapter_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, API_KEY)
    config = ProviderConfig(name="sph", type="spheron", base_url="http://127.0.0.1:9", options={"ssh_key_id": "k"})
    with pytest.raises(ValueError, match=r"provider 'sph' \(type spheron\): options\.team_id is required"):
        build_provider(config, FakeClock())


async def test_spot_tiers_ask_for_spot_offers_which_the_default_view_hides(make: Factory) -> None:
    env = await make()
    spot = await env.provider.offers(GpuRequest(gpu="RTX 4090", capacity=Capacity.SPOT))
    assert [(o.spot_per_hour, o.on_demand_per_hour) for o in spot] == [(0.25, None)]
    on_demand = await env.provider.offers(GpuRequest(gpu="RTX 4090", capacity=Capacity.ON_DEMAND))
    assert [(o.spot_per_hour, o.on_demand_per_hour) for o in on_demand] == [(None, 0.39)]


@pytest.mark.parametrize("spelling", ["A100 80G PCIe", "a100-80g-pcie", "A100_PCIE_80GB", "A100 PCIe 80G"])
async def test_a100_80g_pcie_spellings_are_the_catalogue_gpu(make: Factory, spelling: str) -> None:
    env = await make(operating_system="Ubuntu Server 22.04")
    for group in env.fake.catalogue:
        for raw in group["offers"]:
            if raw["offerId"] == "mc-a100-pcie-1x":
                raw["gpuType"] = group["gpuType"] = group["gpuModel"] = spelling
    offers = await env.provider.offers(GpuRequest("A100-80GB-PCIe"))
    assert [(o.gpu, o.on_demand_per_hour) for o in offers] == [("A100-80GB-PCIe", 1.04)]


async def test_spot_on_a_dedicated_offer_is_refused(make: Factory) -> None:
    env = await make()
    offer = await first_offer(env, Capacity.ON_DEMAND)
    with pytest.raises(InvalidRequest):
        await env.provider.create(spec("sct-mix-0001", offer, Capacity.SPOT))


async def test_missing_ssh_key_option_is_a_clear_error(make: Factory) -> None:
    env = await make(ssh_key_id=None)
    with pytest.raises(InvalidRequest, match="ssh_key_id"):
        await env.provider.create(spec("sct-ssh-0001", await first_offer(env)))


async def test_capacity_gone_on_the_first_offer_lets_placement_try_the_next(make: Factory) -> None:
    env = await make()
    offers = await env.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND))
    env.fake.set_capacity(OfferRef.decode(offers[0].offer_id, provider="sph").offer_id, 0)  # listing is stale
    before = env.fake.calls
    with pytest.raises(InsufficientCapacity) as info:
        await env.provider.create(spec("sct-cap-0001", offers[0]))
    assert not info.value.retryable and env.fake.calls - before == 2  # lookup + create, no retries
    placed = None
    for offer in offers[1:]:  # what placement does with the error
        try:
            placed = await env.provider.create(spec("sct-cap-0001", offer))
            break
        except InsufficientCapacity:
            continue
    assert placed is not None and placed.region == offers[1].region


# ---- status, delete ------------------------------------------------------------------------------------
async def test_spot_preemption_maps_to_preempted(make: Factory) -> None:
    env = await make()
    inst = await env.provider.create(spec("sct-spot-0001", await first_offer(env, Capacity.SPOT), Capacity.SPOT))
    assert inst.capacity is Capacity.SPOT and inst.price_per_hour == 0.99
    env.fake.preempt(inst.provider_id)
    got = await env.provider.get(inst.provider_id)
    assert got.status is InstanceStatus.PREEMPTED and got.status.is_gone and got.raw_status == "terminated-provider"


@pytest.mark.parametrize("raw", ["stopped", "migrating-to-new-host", ""])
async def test_unexpected_states_and_fields_are_tolerated(make: Factory, raw: str) -> None:
    env = await make(fake_kwargs={"extra_fields": True})
    inst = await env.provider.create(spec("sct-odd-0001", await first_offer(env)))
    env.fake.set_status(inst.provider_id, raw)
    assert (await env.provider.get(inst.provider_id)).status is InstanceStatus.UNKNOWN
    assert [i.status for i in await env.provider.list("sct-")] == [InstanceStatus.UNKNOWN]


async def test_delete_before_minimum_runtime_is_deferred_not_spun(make: Factory) -> None:
    env = await make(fake_kwargs={"minimum_runtime_minutes": 20})
    inst = await env.provider.create(spec("sct-min-0001", await first_offer(env)))
    env.clock.advance(5 * 60)
    before = env.fake.calls
    with pytest.raises(DeleteDeferred) as info:
        await env.provider.delete(inst.provider_id)
    assert env.fake.calls - before == 1  # one DELETE: the caller retries on a later tick
    assert info.value.retry_after == 15 * 60
    env.clock.advance(info.value.retry_after)
    await env.provider.delete(inst.provider_id)
    assert (await env.provider.get(inst.provider_id)).status is InstanceStatus.TERMINATED
    await env.provider.delete(inst.provider_id)  # already terminated (400 currentStatus) is success
    await env.provider.delete("dep-does-not-exist")  # 404 is success


@pytest.mark.parametrize("paginate", [True, False])
async def test_list_follows_paginated_deployments(make: Factory, paginate: bool) -> None:
    env = await make(fake_kwargs={"paginate_deployments": paginate, "deployments_page_max": 2})
    offer = await first_offer(env)
    keys = [f"sct-page-{i:04d}" for i in range(5)]
    for key in keys:
        await env.provider.create(spec(key, offer))
    env.fake.add_foreign("hand-made-box")
    assert sorted(str(i.key) for i in await env.provider.list("sct-page-")) == keys


async def test_list_finds_ours_behind_1200_old_deployments_on_the_last_page(make: Factory) -> None:
    env = await make(requests_per_15min=1000)  # 61 pages a list: more than the default budget allows twice
    offer = await first_offer(env)
    env.fake.seed_old(1200, live_every=100)
    ours = await env.provider.create(spec("sct-last-0001", offer))
    before = env.fake.calls
    listed = await env.provider.list("sct-last-")
    assert [(i.key, i.provider_id) for i in listed] == [("sct-last-0001", ours.provider_id)]
    assert env.fake.calls - before == 61  # 1,201 deployments, 20 a page: every page read


async def test_creates_after_a_listing_look_up_in_it_instead_of_reading_every_page_again(make: Factory) -> None:
    env = await make(requests_per_15min=1000)
    offer = await first_offer(env)
    env.fake.seed_old(820)  # 41 pages of 20
    await env.provider.list("sct-")  # the reconciler's listing at the start of its tick
    before = env.fake.calls
    keys = [f"sct-tick-{i:04d}" for i in range(3)]
    made = await asyncio.gather(*(env.provider.create(spec(key, offer)) for key in keys))
    assert [m.key for m in made] == keys
    assert env.fake.calls - before == 3  # three POSTs; each used to list all 41 pages first (126 requests)


async def test_a_key_created_after_the_listing_began_is_looked_up_in_a_new_listing(make: Factory) -> None:
    env = await make(requests_per_15min=1000)
    offer = await first_offer(env)
    env.fake.seed_old(100)
    await env.provider.list("sct-")
    env.clock.advance(1)
    first = await env.provider.create(spec("sct-again-0001", offer))
    env.clock.advance(1)
    again = await env.provider.create(spec("sct-again-0001", offer))  # e.g. its answer was taken for lost
    assert again.provider_id == first.provider_id
    assert len(env.fake.create_bodies) == 1  # found by a listing begun after the create: not sent twice


async def test_a_list_longer_than_max_pages_fails_loudly_instead_of_truncating(make: Factory) -> None:
    env = await make(max_pages=40)
    env.fake.seed_old(820)
    with pytest.raises(ListingIncomplete) as info:
        await env.provider.list("sct-")
    assert "more than 40 pages" in str(info.value) and "max_pages" in str(info.value)


async def test_a_full_page_that_names_no_next_page_is_not_taken_for_the_whole_list(make: Factory) -> None:
    env = await make(page_size=20, fake_kwargs={"paging_fields": False})
    env.fake.seed_old(45)
    with pytest.raises(ListingIncomplete, match="without saying whether more follow"):
        await env.provider.list("sct-")


async def test_a_list_that_shrinks_while_paging_is_read_again(make: Factory) -> None:
    env = await make(requests_per_15min=1000)
    offer = await first_offer(env)
    env.fake.seed_old(40)
    ours = await env.provider.create(spec("sct-shift-0001", offer))  # the 41st deployment
    env.fake.seed_old(40)
    purged: list[int] = []

    def purge_once(page: int) -> None:
        # Before page 3 is served, ten old deployments are purged: every row moves ten places up and
        # ours (41st) slides onto page 2, which was already read.
        if page == 3 and not purged:
            with env.fake.lock:
                for did in list(env.fake.deployments)[:10]:
                    del env.fake.deployments[did]
            purged.append(page)

    env.fake.before_list_page = purge_once
    before = env.fake.calls
    listed = await env.provider.list("sct-shift-")
    assert purged and [i.provider_id for i in listed] == [ours.provider_id]
    assert env.fake.calls - before == 3 + 4  # the first pass stopped when the total changed; the second read all


# ---- credentials -------------------------------------------------------------------------------------
async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(AuthFailed) as info:
        build_provider(ProviderConfig(name="sph", type="spheron", options={"team_id": TEAM_ID}), FakeClock())
    assert ENV in str(info.value)


async def test_the_key_never_leaks(make: Factory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    env = await make()
    env.fake.api_key = "a-different-key"  # the server now rejects ours
    with pytest.raises(AuthFailed) as info:
        await env.provider.list("sct-")
    text = " ".join([str(info.value), repr(info.value), repr(env.provider), repr(env.provider.api), caplog.text])
    assert API_KEY not in text
    assert ENV in str(info.value)  # says where to fix it
    assert env.fake.calls == 1  # never retried


# ---- fault injection -----------------------------------------------------------------------------------
async def test_creates_succeed_through_20_percent_5xx_and_timeouts(make: Factory) -> None:
    env = await make(timeout=0.2, creates_per_15min=100, requests_per_15min=1000, fake_kwargs={"hang_seconds": 0.5})
    offer = await first_offer(env)
    env.fake.faults.random_rate = 0.2
    keys = [f"sct-flaky-{i:04d}" for i in range(12)]
    start = env.fake.calls
    for key in keys:
        inst = await create_settled(env.provider, spec(key, offer), env.clock)
        assert inst.key == key
    live = env.fake.live()
    assert sorted(d["name"] for d in live) == keys  # exactly one deployment per key, even after lost responses
    assert Fault.TIMEOUT in env.fake.faults.injected and Fault.SERVER_ERROR in env.fake.faults.injected
    assert env.fake.calls - start <= len(keys) * 2 * 4  # (lookup + create) x at most 4 attempts


async def test_a_429_storm_is_bounded_and_reports_retry_after(make: Factory) -> None:
    env = await make(max_attempts=4, max_wait=20)
    env.fake.faults.add(Fault.RATE_LIMITED, 100)
    t0 = env.clock.now()
    with pytest.raises(RateLimited) as info:
        await env.provider.list("sct-")
    assert env.fake.calls == 1  # a Retry-After (30 s) beyond max_wait (20 s) is not retried inside the call...
    assert info.value.retry_after == 30 and info.value.retryable
    assert env.clock.now() == t0  # ...nor shortened to max_wait: the account pauses for all of it
    with pytest.raises(RateLimited):
        await env.provider.list("sct-")
    assert env.fake.calls == 1  # asked again inside the 30 s: not sent


async def test_offers_errors_stay_in_the_taxonomy(make: Factory) -> None:
    env = await make(max_attempts=2)
    env.fake.faults.add(Fault.SERVER_ERROR, 2)
    with pytest.raises(ProviderError):
        await env.provider.offers(GpuRequest("H100"))
    assert env.fake.calls == 2


def test_bootcmd_runs_first_in_runcmd_because_spheron_has_no_every_boot_hook() -> None:
    doc = {
        "bootcmd": ["[ ! -x /opt/cache.sh ] || /opt/cache.sh"],
        "runcmd": [["/opt/cache.sh"], ["systemctl", "enable", "--now", "vllm server.service"]],
    }
    payload = cloud_init_payload(CloudConfig(doc), provider="spheron")
    assert payload["runcmd"] == [
        "[ ! -x /opt/cache.sh ] || /opt/cache.sh",
        "/opt/cache.sh",
        "systemctl enable --now 'vllm server.service'",
    ]


async def test_an_unknown_ssh_key_on_create_is_a_configuration_error_not_a_missing_instance() -> None:
    from scalectl.clocks import FakeClock
    from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec
    from scalectl.providers.errors import InvalidRequest
    from scalectl.providers.registry import ProviderConfig
    from scalectl.providers.spheron import SpheronProvider
    from tests.fakes.spheron_server import API_KEY, TEAM_ID, start_fake_spheron

    clock = FakeClock()
    _fake, server = start_fake_spheron(clock, minimum_runtime_minutes=0)
    try:
        import os

        os.environ["SCALECTL_TEST_SPHERON_KEY"] = API_KEY
        provider = SpheronProvider(
            ProviderConfig(
                "spheron",
                "spheron",
                base_url=server.url,
                api_key_env="SCALECTL_TEST_SPHERON_KEY",
                options={"ssh_key_id": "no-such-key", "team_id": TEAM_ID},
            ),
            clock,
        )
        offer = next(o for o in await provider.offers(GpuRequest("H100-SXM5-80GB")) if o.available)
        with pytest.raises(InvalidRequest, match=r"SSH key not found.*ssh_key_id"):
            await provider.create(LaunchSpec(key="sct-sshkey-1", tier="t", offer=offer, capacity=Capacity.ON_DEMAND))
        await provider.aclose()
    finally:
        server.stop()
        os.environ.pop("SCALECTL_TEST_SPHERON_KEY", None)


async def test_the_documented_request_budget_is_kept_on_our_side(make: Factory) -> None:
    env = await make(requests_per_15min=5, fake_kwargs={"rate_limit": (5, 900)})
    for _ in range(5):
        await env.provider.list("sct-")
    sent = env.fake.calls
    with pytest.raises(RateLimited) as info:
        await env.provider.list("sct-")
    assert env.fake.calls == sent == 5  # refused before sending: the fake never answered a 429
    assert info.value.retryable and info.value.retry_after == pytest.approx(900)
    assert "5 per 900s" in str(info.value) and "Spheron: 100-250 requests / 15 min / IP" in str(info.value)
    env.clock.advance(900)
    await env.provider.list("sct-")  # a new window


async def test_creates_keep_to_ten_per_15_minutes(make: Factory) -> None:
    env = await make(requests_per_15min=1000, fake_kwargs={"create_limit": (10, 900)})
    offer = await first_offer(env)
    for i in range(10):
        await env.provider.create(spec(f"sct-burst-{i:04d}", offer))
    with pytest.raises(RateLimited, match="10 deployment creates / 15 min"):
        await env.provider.create(spec("sct-burst-0010", offer))
    assert len(env.fake.create_bodies) == 10 and env.fake.create_limit is not None
    assert env.fake.create_limit.refused == 0  # the eleventh never reached the server


async def test_a_listing_starts_only_when_the_budget_fits_all_its_pages(make: Factory) -> None:
    env = await make(requests_per_15min=100)
    env.fake.seed_old(1_010)  # 51 pages of 20
    await env.provider.list("sct-")  # 51 requests; the next listing is known to need 51 too
    sent = env.fake.calls
    with pytest.raises(RateLimited, match="not started, 51 requests needed and 49 left"):
        await env.provider.list("sct-")
    assert env.fake.calls == sent  # nothing spent on a listing that could not finish
    env.clock.advance(900)
    assert await env.provider.list("sct-") == []


async def test_a_listing_larger_than_a_whole_budget_window_is_incomplete_not_retried(make: Factory) -> None:
    env = await make(requests_per_15min=40, max_pages=1000)
    env.fake.seed_old(1_010)
    with pytest.raises(RateLimited):  # cut short after 40 pages, having learnt there are 51
        await env.provider.list("sct-")
    env.clock.advance(900)
    sent = env.fake.calls
    with pytest.raises(ListingIncomplete, match="takes 51 requests, more than the request budget allows"):
        await env.provider.list("sct-")
    assert env.fake.calls == sent
