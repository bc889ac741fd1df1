"""Lambda Cloud adapter specifics, against the local Lambda API over real loopback HTTP."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    QuotaExceeded,
    RateLimited,
)
from scalectl.providers.lambda_cloud import LambdaProvider, parse_instance_type
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.serving.bootstrap.cloud_init import render_user_data
from scalectl.sizing.server import ServerDescription
from tests.fakes import Fault, LoopbackServer
from tests.fakes.lambda_server import API_KEY, SSH_KEY_NAME, FakeLambda, start_fake_lambda
from tests.fakes.settle import create_settled

ENV = "SCALECTL_LAMBDA_API_KEY"


@dataclass
class Env:
    clock: FakeClock
    fake: FakeLambda
    server: LoopbackServer
    provider: LambdaProvider


Factory = Callable[..., Awaitable[Env]]


@pytest.fixture
async def make(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv(ENV, API_KEY)
    made: list[Env] = []

    async def factory(*, fake_kwargs: dict[str, Any] | None = None, **options: Any) -> Env:
        clock = FakeClock()
        fake, server = start_fake_lambda(clock, **(fake_kwargs or {}))
        config = ProviderConfig(
            name="lam",
            type="lambda",
            base_url=f"{server.url}/api/v1",
            options={"ssh_key_name": SSH_KEY_NAME, **options},
        )
        env = Env(clock, fake, server, LambdaProvider(config, clock))
        made.append(env)
        return env

    yield factory
    for env in made:
        await env.provider.aclose()
        env.server.stop()


def spec(key: str, offer: Offer, capacity: Capacity = Capacity.ON_DEMAND, **kw: Any) -> LaunchSpec:
    return LaunchSpec(key=key, tier="web", offer=offer, capacity=capacity, **kw)


async def h100(env: Env, region: str | None = None) -> Offer:
    offers = await env.provider.offers(GpuRequest(gpu="H100-SXM5-80GB", regions=(region,) if region else ()))
    return next(o for o in offers if o.available)


# ---- names and offers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu_1x_h100_sxm5", ("H100-SXM5-80GB", 1)),
        ("gpu_8x_a100_80gb_sxm4", ("A100-80GB-SXM4", 8)),
        ("gpu_1x_a100_sxm4", ("A100-40GB-SXM4", 1)),
        ("gpu_1x_h100_pcie", ("H100-PCIe-80GB", 1)),
        ("gpu_1x_a100", ("A100-40GB-PCIe", 1)),
        ("gpu_1x_gh200", None),
        ("cpu_4x_general", None),
    ],
)
def test_instance_type_names_map_to_the_catalogue(name: str, expected: tuple[str, int] | None) -> None:
    assert parse_instance_type(name) == expected


async def test_offers_price_whole_instances_and_mark_live_capacity(make: Factory) -> None:
    env = await make()
    eight = await env.provider.offers(GpuRequest(gpu="H100", count=8))
    assert [(o.offer_id, o.region, o.on_demand_per_hour, o.available) for o in eight] == [
        ("gpu_8x_h100_sxm5", "us-west-3", 23.92, True)
    ]
    one = await env.provider.offers(GpuRequest(gpu="H100", count=1))
    assert {o.region for o in one} == {"us-east-1", "us-west-3"} and all(o.on_demand_per_hour == 3.29 for o in one)
    assert all(o.spot_per_hour is None for o in one)
    # asked for a region without capacity: offered, but not available
    none = await env.provider.offers(GpuRequest(gpu="A100-80GB-SXM4", count=8, regions=("us-east-1",)))
    assert [(o.region, o.available) for o in none] == [("us-east-1", False)]


async def test_no_spot_unknown_gpu_and_unknown_region(make: Factory) -> None:
    env = await make()
    assert await env.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.SPOT)) == []
    assert await env.provider.offers(GpuRequest(gpu="GH200")) == []
    with pytest.raises(InvalidRequest) as info:
        await env.provider.offers(GpuRequest(gpu="H100", regions=("moon-1",)))
    assert "moon-1" in str(info.value) and "us-east-1" in str(info.value)


# ---- create and the launch limit ---------------------------------------------------------------------
async def test_launch_sends_the_documented_fields(make: Factory) -> None:
    env = await make()
    server = ServerDescription(model="meta-llama/Llama-3.1-8B-Instruct", args=("--max-model-len", "8192"))
    user_data = render_user_data(server)  # the adapter renders the launch's server as cloud-init user data
    inst = await env.provider.create(spec("sct-web-0001", await h100(env), server=server))
    body = env.fake.launch_bodies[-1]
    assert body == {
        "region_name": inst.region,
        "instance_type_name": "gpu_1x_h100_sxm5",
        "ssh_key_names": [SSH_KEY_NAME],
        "name": "sct-web-0001",
        "user_data": user_data,
    }
    assert inst.status is InstanceStatus.PENDING and inst.price_per_hour == 3.29 and inst.address is None
    env.fake.make_running(inst.provider_id)
    got = await env.provider.get(inst.provider_id)
    assert got.status is InstanceStatus.RUNNING and got.gpu == "H100-SXM5-80GB" and str(got.address).endswith(":8000")


async def test_spot_launch_spec_is_refused_without_a_call(make: Factory) -> None:
    env = await make()
    offer = await h100(env)
    before = env.fake.calls
    with pytest.raises(InvalidRequest, match="spot"):
        await env.provider.create(spec("sct-spot-0001", offer, Capacity.SPOT))
    assert env.fake.calls == before


async def test_missing_ssh_key_option_is_a_clear_error(make: Factory) -> None:
    env = await make(ssh_key_name=None)
    with pytest.raises(InvalidRequest, match="ssh_key_name"):
        await env.provider.create(spec("sct-key-0001", await h100(env)))


async def test_launches_are_spaced_12s_apart_and_none_is_rejected(make: Factory) -> None:
    env = await make()
    offer = await h100(env)
    for i in range(3):
        await env.provider.create(spec(f"sct-pace-{i:04d}", offer))
    times = env.fake.launch_times
    assert len(times) == 3
    assert all(b - a >= 12.0 - 1e-6 for a, b in itertools.pairwise(times))
    assert env.fake.throttled == 0  # the fake would have answered 429; it never had to


async def test_without_pacing_the_fake_throttles_and_retry_after_recovers(make: Factory) -> None:
    env = await make(launch_interval=0)  # adapter no longer paces launches
    offer = await h100(env)
    await env.provider.create(spec("sct-nopace-0001", offer))
    t0 = env.clock.monotonic()
    await env.provider.create(spec("sct-nopace-0002", offer))
    assert env.fake.throttled >= 1  # the fake enforced Lambda's limit with 429
    assert env.clock.monotonic() - t0 >= 12.0 - 1e-6  # the adapter waited the documented 12 s, then succeeded
    assert sorted(i["name"] for i in env.fake.live()) == ["sct-nopace-0001", "sct-nopace-0002"]


async def test_capacity_gone_on_the_first_offer_lets_placement_try_the_next(make: Factory) -> None:
    env = await make()
    offers = [o for o in await env.provider.offers(GpuRequest(gpu="H100")) if o.available]
    assert len(offers) == 2
    env.fake.capacity["gpu_1x_h100_sxm5"][offers[0].region] = 0  # sold out after the listing
    before = env.fake.calls
    with pytest.raises(InsufficientCapacity):
        await env.provider.create(spec("sct-cap-0001", offers[0]))
    assert env.fake.calls - before == 2  # lookup + launch, not retried
    placed = await env.provider.create(spec("sct-cap-0001", offers[1]))
    assert placed.region == offers[1].region


async def test_quota_code_maps_to_quota_exceeded(make: Factory) -> None:
    env = await make()
    offer = await h100(env)
    original = env.fake._validate_launch

    def over_quota(body: Any) -> Any:
        return env.fake._error(400, "global/quota-exceeded", "Quota exceeded.", "Contact support.")

    env.fake._validate_launch = over_quota  # type: ignore[method-assign]
    with pytest.raises(QuotaExceeded):
        await env.provider.create(spec("sct-quota-0001", offer))
    env.fake._validate_launch = original  # type: ignore[method-assign]


# ---- status, get, delete -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ("booting", InstanceStatus.PENDING),
        ("active", InstanceStatus.RUNNING),
        ("terminating", InstanceStatus.STOPPING),
        ("preempted", InstanceStatus.PREEMPTED),
        ("unhealthy", InstanceStatus.UNKNOWN),
        ("rebuilding-v2", InstanceStatus.UNKNOWN),
    ],
)
async def test_statuses_and_extra_fields(make: Factory, raw: str, status: InstanceStatus) -> None:
    env = await make(fake_kwargs={"extra_fields": True})
    inst = await env.provider.create(spec("sct-st-0001", await h100(env)))
    env.fake.set_status(inst.provider_id, raw)
    assert (await env.provider.get(inst.provider_id)).status is status
    assert [i.status for i in await env.provider.list("sct-")] == [status]


async def test_get_unknown_and_delete_are_idempotent(make: Factory) -> None:
    env = await make()
    with pytest.raises(InstanceNotFound):
        await env.provider.get("0" * 32)
    await env.provider.delete("0" * 32)  # object-does-not-exist is success
    inst = await env.provider.create(spec("sct-del-0001", await h100(env)))
    await env.provider.delete(inst.provider_id)
    await env.provider.delete(inst.provider_id)
    assert (await env.provider.get(inst.provider_id)).status is InstanceStatus.TERMINATED


async def test_delete_of_a_terminated_instance_refused_by_the_api_is_success(make: Factory) -> None:
    env = await make(fake_kwargs={"refuse_repeat_terminate": True})
    inst = await env.provider.create(spec("sct-del-0002", await h100(env)))
    await env.provider.delete(inst.provider_id)
    before = len(env.fake.requests)
    await env.provider.delete(inst.provider_id)  # 400 from the API, then a re-read shows it terminated
    assert [m for m, _ in env.fake.requests[before:]] == ["POST", "GET"]


async def test_list_finds_ours_by_name_only(make: Factory) -> None:
    env = await make()
    offer = await h100(env)
    await env.provider.create(spec("sct-a-0001", offer))
    env.fake.add_foreign("sct-a-but-typed-by-hand UPPER")  # not a valid key: not ours
    env.fake.add_foreign("jupyter-box")
    assert [i.key for i in await env.provider.list("sct-a-")] == ["sct-a-0001"]


# ---- credentials -------------------------------------------------------------------------------------
async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(AuthFailed) as info:
        build_provider(ProviderConfig(name="lam", type="lambda"), FakeClock())
    assert ENV in str(info.value)


async def test_bad_key_is_auth_failed_and_never_leaks(make: Factory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    env = await make()
    env.fake.api_key = "some-other-key"
    with pytest.raises(AuthFailed) as info:
        await env.provider.list("sct-")
    text = " ".join([str(info.value), repr(info.value), repr(env.provider), repr(env.provider.api), caplog.text])
    assert API_KEY not in text and ENV in str(info.value)
    assert "invalid-api-key" in str(info.value)
    assert env.fake.calls == 1


# ---- fault injection -----------------------------------------------------------------------------------
async def test_creates_succeed_through_20_percent_5xx_and_timeouts(make: Factory) -> None:
    env = await make(timeout=0.2, fake_kwargs={"hang_seconds": 0.5})
    offer = await h100(env)
    env.fake.faults.random_rate = 0.2
    keys = [f"sct-flaky-{i:04d}" for i in range(10)]
    start = env.fake.calls
    for key in keys:
        assert (await create_settled(env.provider, spec(key, offer), env.clock)).key == key
    assert sorted(i["name"] for i in env.fake.live()) == keys  # one instance per key despite lost responses
    assert {Fault.TIMEOUT, Fault.SERVER_ERROR} <= set(env.fake.faults.injected)
    assert env.fake.calls - start <= len(keys) * 2 * 4
    assert env.fake.throttled == 0


async def test_a_429_storm_is_bounded_and_reports_retry_after(make: Factory) -> None:
    env = await make(max_attempts=3)
    env.fake.faults.add(Fault.RATE_LIMITED, 100)
    with pytest.raises(RateLimited) as info:
        await env.provider.list("sct-")
    assert env.fake.calls == 3
    assert info.value.retry_after is not None and info.value.retry_after >= 1.0
