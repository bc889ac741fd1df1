"""EC2 adapter specifics, against moto's EC2 with EC2 errors injected through botocore's own event hooks."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import random
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws
from moto.core.botocore_stubber import MockRawResponse

from scalectl.clocks import FakeClock
from scalectl.providers.aws import DEFAULT_AMI_SSM_PARAMETER, AwsEc2Provider, instance_status, latest_spot_prices
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer
from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    Transient,
)
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.providers.tagging import KEY_TAG, TIER_TAG
from scalectl.serving.bootstrap.cloud_init import render_user_data
from scalectl.sizing.server import ServerDescription
from tests.fakes.aws_moto import BASE_AMI, REGION, FakeEc2, set_fake_credentials


@dataclass
class Env:
    provider: AwsEc2Provider
    fake: FakeEc2
    clock: FakeClock


def _config(**options: Any) -> ProviderConfig:
    return ProviderConfig(name="aws-test", type="aws", options={"region": REGION, "ami_id": BASE_AMI, **options})


async def _env(clock: FakeClock, **options: Any) -> Env:
    provider = AwsEc2Provider(_config(**options), clock)
    fake = FakeEc2(options.get("region", REGION))
    fake.attach(await provider.ensure_client())
    return Env(provider, fake, clock)


@pytest.fixture
async def env(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        e = await _env(FakeClock())
        yield e
        await e.provider.aclose()


async def _offer(env: Env, gpu: str = "H100", count: int = 1, capacity: Capacity = Capacity.ON_DEMAND) -> Offer:
    offers = await env.provider.offers(GpuRequest(gpu=gpu, count=count, capacity=capacity))
    assert offers, f"no {capacity} offer for {count}x {gpu}"
    return offers[0]


def _spec(offer: Offer, key: str = "sct-unit-1", capacity: Capacity | None = None, **kw: Any) -> LaunchSpec:
    cap = capacity or (Capacity.SPOT if offer.spot_per_hour is not None else Capacity.ON_DEMAND)
    return LaunchSpec(key=key, tier="batch", offer=offer, capacity=cap, **kw)


# ---- offers ----------------------------------------------------------------------------------------
async def test_offers_map_gpu_and_count_to_instance_types(env: Env) -> None:
    one = await env.provider.offers(GpuRequest(gpu="H100 SXM5", count=1, capacity=Capacity.ON_DEMAND))
    eight = await env.provider.offers(GpuRequest(gpu="H100-SXM5-80GB", count=8, capacity=Capacity.ON_DEMAND))
    l40s = await env.provider.offers(GpuRequest(gpu="L40S", count=1, capacity=Capacity.ON_DEMAND))
    assert [o.offer_id for o in one] == [f"p5.4xlarge/{REGION}/on-demand"]
    assert [(o.offer_id, o.on_demand_per_hour, o.gpu_count) for o in eight] == [
        (f"p5.48xlarge/{REGION}/on-demand", 55.04, 8)
    ]
    assert eight[0].on_demand_per_hour == pytest.approx(6.88 * 8)  # the case study's $/GPU-hour
    assert [o.offer_id.split("/")[0] for o in l40s] == ["g6e.xlarge"]
    assert all(o.available for o in one + eight + l40s)


async def test_offers_filter_region_and_capacity_and_unknown_gpu(env: Env) -> None:
    assert await env.provider.offers(GpuRequest(gpu="H100", regions=("eu-west-1",))) == []
    assert await env.provider.offers(GpuRequest(gpu="H100", count=3)) == []  # no 3-GPU instance type
    calls = env.fake.total_calls()
    assert await env.provider.offers(GpuRequest(gpu="TPU-v5")) == []
    assert env.fake.total_calls() == calls  # nothing to ask EC2
    both = await env.provider.offers(GpuRequest(gpu="H100", regions=(REGION,)))
    assert {o.offer_id.rsplit("/", 1)[1] for o in both} == {"on-demand", "spot"}
    spot = next(o for o in both if o.spot_per_hour is not None)
    assert spot.on_demand_per_hour is None and spot.spot_per_hour > 0


async def test_on_demand_price_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        e = await _env(FakeClock(), on_demand_prices={"p5.4xlarge": 4.25})
        (offer,) = await e.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND))
        assert offer.on_demand_per_hour == 4.25


async def test_instance_type_not_offered_in_region_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    with mock_aws():  # moto's offering data has no p5.4xlarge in eu-central-1
        e = await _env(FakeClock(), region="eu-central-1")
        (offer,) = await e.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND))
        assert offer.region == "eu-central-1" and not offer.available


def test_latest_spot_price_per_zone_then_cheapest_zone() -> None:
    t = lambda h: datetime(2026, 3, 1, h, tzinfo=UTC)  # noqa: E731
    history = [
        {"InstanceType": "p5.4xlarge", "AvailabilityZone": "us-east-1a", "SpotPrice": "1.00", "Timestamp": t(1)},
        {"InstanceType": "p5.4xlarge", "AvailabilityZone": "us-east-1a", "SpotPrice": "3.00", "Timestamp": t(5)},
        {"InstanceType": "p5.4xlarge", "AvailabilityZone": "us-east-1b", "SpotPrice": "2.50", "Timestamp": t(4)},
        {"InstanceType": "p5.4xlarge", "AvailabilityZone": "us-east-1b", "SpotPrice": "9.00", "Timestamp": t(2)},
        {"InstanceType": "g6e.xlarge", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.70", "Timestamp": t(3)},
        {"InstanceType": "g6e.xlarge", "AvailabilityZone": "us-east-1a", "SpotPrice": "oops", "Timestamp": t(6)},
        {"InstanceType": "g6e.xlarge", "SpotPrice": "0.01", "Timestamp": t(6)},  # no zone: ignored
    ]
    # 1a's latest is 3.00 (not its older 1.00), 1b's latest 2.50: the cheapest zone now is 1b.
    assert latest_spot_prices(history) == {"p5.4xlarge": 2.50, "g6e.xlarge": 0.70}
    assert latest_spot_prices(history, zone="us-east-1a") == {"p5.4xlarge": 3.00, "g6e.xlarge": 0.70}


async def test_spot_price_history_is_asked_for_now_and_linux(env: Env) -> None:
    await env.provider.offers(GpuRequest(gpu="H100", capacity=Capacity.SPOT))
    (params,) = env.fake.params_of("DescribeSpotPriceHistory")
    assert params["InstanceTypes"] == ["p5.4xlarge"]
    assert params["ProductDescriptions"] == ["Linux/UNIX"]
    assert params["StartTime"].timestamp() == env.clock.now()  # the injected clock, not the host's


# ---- create ----------------------------------------------------------------------------------------
async def test_create_sends_client_token_tags_user_data_and_safe_defaults(env: Env) -> None:
    offer = await _offer(env)
    server = ServerDescription(model="meta-llama/Llama-3.1-8B-Instruct", args=("--max-model-len", "8192"))
    cloud_init = render_user_data(server)  # the adapter renders the launch's server as cloud-init user data
    spec = _spec(offer, server=server, tags={"team": "agents", "aws:reserved": "x"})
    created = await env.provider.create(spec)
    (params,) = env.fake.params_of("RunInstances")
    assert params["ClientToken"] == "sct-unit-1"
    assert params["InstanceType"] == "p5.4xlarge"
    assert "InstanceMarketOptions" not in params
    tags = {t["Key"]: t["Value"] for t in params["TagSpecifications"][0]["Tags"]}
    assert tags == {"Name": "sct-unit-1", KEY_TAG: "sct-unit-1", TIER_TAG: "batch", "team": "agents"}
    assert {ts["ResourceType"] for ts in params["TagSpecifications"]} == {"instance", "volume"}
    assert params["MetadataOptions"]["HttpTokens"] == "required"
    assert params["BlockDeviceMappings"][0]["Ebs"]["DeleteOnTermination"] is True
    # What EC2 stored: our tags, and the user data (base64 on the wire) round-trips.
    inst = env.fake.instance(created.provider_id)
    assert {t["key"]: t["value"] for t in inst.get_tags()}[KEY_TAG] == "sct-unit-1"
    stored = env.provider.client.describe_instance_attribute(InstanceId=created.provider_id, Attribute="userData")
    assert base64.b64decode(stored["UserData"]["Value"]).decode() == cloud_init
    assert created.key == "sct-unit-1" and created.capacity is Capacity.ON_DEMAND
    assert created.gpu == "H100-SXM5-80GB" and created.gpu_count == 1 and created.price_per_hour == 6.88


async def test_default_image_is_the_deep_learning_ami_via_ssm(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        provider = AwsEc2Provider(
            ProviderConfig(
                name="aws-test",
                type="aws",
                options={
                    "region": REGION,
                    "subnet_id": "subnet-123",
                    "security_group_ids": ["sg-1", "sg-2"],
                    "key_name": "ops",
                    "iam_instance_profile": "arn:aws:iam::123456789012:instance-profile/vllm",
                    "root_volume_gb": 500,
                },
            ),
            FakeClock(),
        )
        fake = FakeEc2()
        fake.attach(await provider.ensure_client())
        fake.fail_next("InvalidSubnetID.NotFound", operation="RunInstances")  # moto has no subnet-123
        offer = (await provider.offers(GpuRequest(gpu="H100", capacity=Capacity.ON_DEMAND)))[0]
        with pytest.raises(InvalidRequest, match=r"InvalidSubnetID\.NotFound"):
            await provider.create(_spec(offer))
        (params,) = fake.params_of("RunInstances")
        assert params["ImageId"] == f"resolve:ssm:{DEFAULT_AMI_SSM_PARAMETER}"
        assert params["SubnetId"] == "subnet-123" and params["SecurityGroupIds"] == ["sg-1", "sg-2"]
        assert params["KeyName"] == "ops"
        assert params["IamInstanceProfile"] == {"Arn": "arn:aws:iam::123456789012:instance-profile/vllm"}
        assert params["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 500


async def test_spot_create_uses_one_time_terminate_and_max_price(env: Env) -> None:
    offer = await _offer(env, capacity=Capacity.SPOT)
    created = await env.provider.create(_spec(offer, bid_per_hour=2.5))
    (params,) = env.fake.params_of("RunInstances")
    assert params["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
            "MaxPrice": "2.5000",
        },
    }
    got = await env.provider.get(created.provider_id)
    assert got.capacity is Capacity.SPOT and got.price_per_hour is None


async def test_create_twice_launches_once(env: Env) -> None:
    offer = await _offer(env)
    first = await env.provider.create(_spec(offer, key="sct-twice"))
    second = await env.provider.create(_spec(offer, key="sct-twice"))
    assert second.provider_id == first.provider_id
    assert len(env.fake.params_of("RunInstances")) == 1


async def test_create_prefers_a_live_instance_over_a_terminated_one_with_the_key(env: Env) -> None:
    offer = await _offer(env)
    old = await env.provider.create(_spec(offer, key="sct-reuse"))
    env.fake.set_state(old.provider_id, "terminated", code=48)
    live = env.fake.run_foreign("sct-reuse")
    env.fake.backend.create_tags([live], {KEY_TAG: "sct-reuse", TIER_TAG: "batch"})
    again = await env.provider.create(_spec(offer, key="sct-reuse"))
    assert again.provider_id == live


async def test_create_retries_transient_errors_with_the_same_client_token(env: Env) -> None:
    offer = await _offer(env)
    env.fake.fail_next("InternalError", status=500, operation="RunInstances")
    created = await env.provider.create(_spec(offer, key="sct-retry"))
    tokens = [p["ClientToken"] for p in env.fake.params_of("RunInstances")]
    assert tokens == ["sct-retry", "sct-retry"]  # EC2 returns the first launch if it had gone through
    assert created.key == "sct-retry"


async def test_create_rejects_bad_offers_before_calling_ec2(env: Env) -> None:
    offer = await _offer(env)
    calls = env.fake.total_calls()
    elsewhere = Offer(**{**_offer_fields(offer), "region": "eu-west-1"})
    with pytest.raises(InvalidRequest, match=f"configured for '{REGION}'"):
        await env.provider.create(_spec(elsewhere))
    foreign = Offer(**{**_offer_fields(offer), "provider": "runpod"})
    with pytest.raises(InvalidRequest, match="belongs to runpod"):
        await env.provider.create(_spec(foreign))
    unknown = Offer(**{**_offer_fields(offer), "offer_id": f"x9.huge/{REGION}/on-demand"})
    with pytest.raises(InvalidRequest, match="no known instance type"):
        await env.provider.create(_spec(unknown))
    with pytest.raises(ValueError, match="invalid instance key"):
        await env.provider.create(_spec(offer, key="Not A Key"))
    assert env.fake.total_calls() == calls


async def test_user_data_over_16k_is_rejected_without_launching(env: Env) -> None:
    offer = await _offer(env)
    with pytest.raises(InvalidRequest, match="user data"):
        await env.provider.create(_spec(offer, server=ServerDescription(model="m", args=("--x", "#" * 16 * 1024))))
    assert env.fake.params_of("RunInstances") == []


def _offer_fields(offer: Offer) -> dict[str, Any]:
    return {f: getattr(offer, f) for f in offer.__dataclass_fields__}


# ---- status ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        ("pending", "", InstanceStatus.PENDING),
        ("running", "", InstanceStatus.RUNNING),
        ("shutting-down", "", InstanceStatus.STOPPING),
        ("stopping", "", InstanceStatus.STOPPING),
        ("stopped", "Client.UserInitiatedShutdown", InstanceStatus.STOPPED),
        ("terminated", "Client.UserInitiatedShutdown", InstanceStatus.TERMINATED),
        ("terminated", "Server.SpotInstanceTermination", InstanceStatus.PREEMPTED),
        ("shutting-down", "Server.SpotInstanceTermination", InstanceStatus.PREEMPTED),
        ("stopped", "Server.SpotInstanceShutdown", InstanceStatus.PREEMPTED),
        ("terminated", "Server.InsufficientInstanceCapacity", InstanceStatus.FAILED),
        ("terminated", "Client.VolumeLimitExceeded", InstanceStatus.FAILED),
        ("rebooting-into-the-future", "", InstanceStatus.UNKNOWN),
        (None, "", InstanceStatus.UNKNOWN),
    ],
)
def test_status_table(state: str | None, reason: str, expected: InstanceStatus) -> None:
    assert instance_status(state, reason) is expected


async def test_spot_reclaim_shows_as_preempted_through_get_and_list(env: Env) -> None:
    offer = await _offer(env, capacity=Capacity.SPOT)
    created = await env.provider.create(_spec(offer, key="sct-reclaimed"))
    env.fake.set_state(created.provider_id, "terminated", reason_code="Server.SpotInstanceTermination", code=48)
    got = await env.provider.get(created.provider_id)
    assert got.status is InstanceStatus.PREEMPTED
    assert got.raw_status == "terminated:Server.SpotInstanceTermination"
    listed = {i.provider_id: i for i in await env.provider.list("sct-")}
    assert listed[created.provider_id].status is InstanceStatus.PREEMPTED


async def test_running_instance_has_an_address_on_the_server_port(env: Env) -> None:
    offer = await _offer(env)
    created = await env.provider.create(_spec(offer))
    env.fake.set_state(created.provider_id, "running", code=16)
    got = await env.provider.get(created.provider_id)
    inst = env.fake.instance(created.provider_id)
    assert got.address == f"{inst.public_ip}:8000"
    assert got.created_at is not None


# ---- list / get / delete ----------------------------------------------------------------------------
async def test_list_follows_pagination(env: Env) -> None:
    offer = await _offer(env)
    for i in range(5):
        await env.provider.create(_spec(offer, key=f"sct-page-{i}"))
    env.fake.run_foreign("sct-page-99-not-tagged")
    env.provider.list_page_size = 2
    before = env.fake.calls["DescribeInstances"]
    listed = await env.provider.list("sct-page-")
    assert sorted(i.key or "" for i in listed) == [f"sct-page-{i}" for i in range(5)]
    assert env.fake.calls["DescribeInstances"] - before == 3  # 2 + 2 + 1


async def test_get_right_after_launch_tolerates_eventual_consistency(env: Env) -> None:
    offer = await _offer(env)
    created = await env.provider.create(_spec(offer))
    env.fake.fail_next("InvalidInstanceID.NotFound", operation="DescribeInstances")
    with pytest.raises(Transient, match="not visible yet"):
        await env.provider.get(created.provider_id)
    env.clock.advance(env.provider.options.consistency_grace + 1)
    env.fake.fail_next("InvalidInstanceID.NotFound", operation="DescribeInstances")
    with pytest.raises(InstanceNotFound):
        await env.provider.get(created.provider_id)


async def test_delete_terminates_and_tolerates_gone_or_malformed_ids(env: Env) -> None:
    offer = await _offer(env)
    created = await env.provider.create(_spec(offer))
    await env.provider.delete(created.provider_id)
    assert env.fake.instance(created.provider_id).state == "terminated"
    await env.provider.delete("i-0123456789abcdef0")
    env.fake.fail_next("InvalidInstanceID.Malformed", operation="TerminateInstances")
    await env.provider.delete("not-an-id")


# ---- errors and retries -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("InsufficientInstanceCapacity", 500, InsufficientCapacity),
        ("SpotMaxPriceTooLow", 400, InsufficientCapacity),
        ("MaxSpotInstanceCountExceeded", 400, QuotaExceeded),
        ("InstanceLimitExceeded", 400, QuotaExceeded),
        ("VcpuLimitExceeded", 400, QuotaExceeded),
        ("RequestLimitExceeded", 503, RateLimited),
        ("Throttling", 400, RateLimited),
        ("AuthFailure", 401, AuthFailed),
        ("UnauthorizedOperation", 403, AuthFailed),
        ("InternalError", 500, Transient),
        ("Unavailable", 503, Transient),
        ("SomethingNewAndBroken", 502, Transient),
        ("InvalidParameterValue", 400, InvalidRequest),
        ("SomethingNewAndRejected", 400, InvalidRequest),
    ],
)
async def test_ec2_error_codes_map_to_the_taxonomy(
    env: Env, code: str, status: int, expected: type[ProviderError]
) -> None:
    offer = await _offer(env, capacity=Capacity.SPOT)
    attempts = env.provider.options.max_attempts if expected.retryable else 1
    env.fake.fail_next(code, status=status, operation="RunInstances", times=attempts)
    with pytest.raises(expected) as info:
        await env.provider.create(_spec(offer, key=f"sct-{code.lower()[:40]}"))
    assert code in str(info.value)
    assert len(env.fake.params_of("RunInstances")) == attempts  # retried only when it can help, bounded


async def test_timeouts_are_transient_and_retried(env: Env) -> None:
    env.fake.time_out_next("DescribeInstances", times=2)
    assert await env.provider.list("sct-") == []
    env.fake.time_out_next("DescribeInstances", times=10)
    with pytest.raises(Transient, match="ReadTimeoutError"):
        await env.provider.list("sct-")
    env.fake.clear_faults()


async def test_twenty_percent_5xx_and_timeouts_still_succeed_within_bounded_calls(env: Env) -> None:
    rng = random.Random(20)
    offer = await _offer(env)
    env.fake.calls.clear()
    ops = injected = 0
    for i in range(20):
        for _ in range(env.provider.options.max_attempts - 1):  # never more faults in a row than retries
            roll = rng.random()
            if roll < 0.1:
                env.fake.time_out_next()
            elif roll < 0.2:
                env.fake.fail_next(rng.choice(["InternalError", "Unavailable"]), status=503)
            injected += roll < 0.2
        created = await env.provider.create(_spec(offer, key=f"sct-flaky-{i}"))
        await env.provider.get(created.provider_id)
        ops += 3  # lookup + launch + get
        env.fake.clear_faults()
    assert len(await env.provider.list("sct-flaky-")) == 20
    assert injected > 0
    assert env.fake.total_calls() == ops + 1 + injected  # each fault cost exactly one extra call


async def test_throttling_storm_is_bounded_and_raises_rate_limited(env: Env) -> None:
    env.fake.fail_next("RequestLimitExceeded", status=503, times=50)
    before = env.clock.now()
    with pytest.raises(RateLimited) as info:
        await env.provider.list("sct-")
    assert env.fake.total_calls() == env.provider.options.max_attempts
    assert info.value.retryable and info.value.retry_after is None  # EC2 sends no Retry-After
    assert env.clock.now() > before  # the backoff slept on the injected clock
    env.fake.clear_faults()


async def test_botocore_does_not_retry_on_its_own(env: Env) -> None:
    """A real HTTP-level 503 from EC2 reaches the adapter after one send, not botocore's usual 3-5."""
    client = env.provider.client
    assert client.meta.config.retries["total_max_attempts"] == 1
    sends = 0
    body = (
        "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
        "</Message></Error></Errors><RequestID>r-1</RequestID></Response>"
    )

    def throttle(request: Any, **kwargs: Any) -> AWSResponse:
        nonlocal sends
        sends += 1
        return AWSResponse(request.url, 503, {}, MockRawResponse(body))

    client.meta.events.register_first("before-send.ec2.DescribeInstances", throttle)
    with pytest.raises(RateLimited):
        await env.provider.list("sct-")
    assert sends == env.provider.options.max_attempts  # one send per tenacity attempt


async def test_calls_run_off_the_event_loop(env: Env) -> None:
    """A slow EC2 call must not block the loop: the call waits for something only the loop can do."""
    loop_ran = threading.Event()

    def slow(**kwargs: Any) -> None:
        assert loop_ran.wait(timeout=5), "the event loop was blocked by the EC2 call"

    env.provider.client.meta.events.register_first("before-call.ec2.DescribeInstances", slow)

    async def other_work() -> None:
        await asyncio.sleep(0)
        loop_ran.set()

    listed, _ = await asyncio.gather(env.provider.list("sct-"), other_work())
    assert listed == []


# ---- configuration and credentials ------------------------------------------------------------------
def test_registry_builds_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    provider = build_provider(_config(), FakeClock())
    assert isinstance(provider, AwsEc2Provider) and provider.client is None  # no client before first use


def test_options_errors_name_the_field() -> None:
    with pytest.raises(InvalidRequest, match=r"options\.region: Field required"):
        AwsEc2Provider(ProviderConfig(name="acct", type="aws", options={}), FakeClock())
    with pytest.raises(InvalidRequest, match=r"options\.subnet: Extra inputs"):
        AwsEc2Provider(_config(subnet="subnet-1"), FakeClock())


def test_missing_boto3_says_to_install_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # makes `import boto3` raise ImportError
    with pytest.raises(InvalidRequest, match=r"pip install 'scalectl\[aws\]'"):
        AwsEc2Provider(_config(), FakeClock())


async def test_missing_credentials_are_auth_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    provider = AwsEc2Provider(_config(), FakeClock())  # no moto: botocore fails before any request is sent
    with pytest.raises(AuthFailed, match="AWS_ACCESS_KEY_ID"):
        await provider.list("sct-")
    await provider.aclose()


async def test_unknown_profile_is_auth_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    set_fake_credentials(monkeypatch)
    provider = AwsEc2Provider(_config(profile="no-such-profile"), FakeClock())
    with pytest.raises(AuthFailed, match=r"options\.profile"):
        await provider.list("sct-")


async def test_credentials_never_reach_errors_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        key_id, secret = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)  # after moto's own fake keys
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        caplog.set_level(logging.DEBUG)
        e = await _env(FakeClock())
        offer = await _offer(e)
        created = await e.provider.create(_spec(offer))
        e.fake.fail_next("AuthFailure", status=401, message=f"AWS was not able to validate {key_id}")
        with pytest.raises(AuthFailed) as info:
            await e.provider.get(created.provider_id)
        e.fake.fail_next("RequestLimitExceeded", status=503, times=5)
        with pytest.raises(RateLimited) as throttled:
            await e.provider.list("sct-")
        texts = [str(info.value), repr(info.value), str(throttled.value), repr(e.provider.options), repr(e.provider)]
        texts += [r.getMessage() for r in caplog.records if r.name.startswith(("providers", "tests"))]
        texts += [r.getMessage() for r in caplog.records]  # botocore's own debug logging too
        assert all(secret not in t for t in texts)
        assert key_id not in str(info.value) and "<access-key-id>" in str(info.value)
        assert os.environ["AWS_SECRET_ACCESS_KEY"] == secret  # the test did use the secret
        await e.provider.aclose()


async def test_aclose_closes_the_client(env: Env) -> None:
    await env.provider.list("sct-")
    assert env.provider.client is not None
    await env.provider.aclose()
    assert env.provider.client is None
    await env.provider.aclose()  # twice is fine
