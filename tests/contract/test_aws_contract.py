"""The EC2 adapter passes the shared provider contract, against moto's EC2 with injected EC2 errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from moto import mock_aws

from scalectl.clocks import FakeClock
from scalectl.providers.aws import AwsEc2Provider
from scalectl.providers.base import Capacity
from scalectl.providers.registry import ProviderConfig
from tests.contract.suite import ContractHarness, Fault, ProviderContract
from tests.fakes.aws_moto import BASE_AMI, REGION, FakeEc2, set_fake_credentials


class AwsHarness(ContractHarness):
    gpu = "H100-SXM5-80GB"  # p5.4xlarge: one H100

    def __init__(self, provider: AwsEc2Provider, fake: FakeEc2, capacity: Capacity) -> None:
        self.provider = provider
        self.fake = fake
        self.capacity = capacity
        self.max_retries = provider.options.max_attempts - 1
        self.stoppable = False if capacity is Capacity.SPOT else None  # one-time spot instances cannot stop

    def take_gpu(self, provider_id: str) -> None:
        # What EC2 answers a StartInstances with no capacity left for the type in the instance's zone.
        self.fake.fail_next("InsufficientInstanceCapacity", status=500, operation="StartInstances")

    async def make_running(self, provider_id: str) -> None:
        self.fake.set_state(provider_id, "running", code=16)

    def inject(self, fault: Fault, times: int = 1) -> None:
        if fault is Fault.NO_CAPACITY:  # EC2 lists it among its server (5xx) errors; the code decides
            self.fake.fail_next("InsufficientInstanceCapacity", status=500, operation="RunInstances", times=times)
        elif fault is Fault.AUTH:
            self.fake.fail_next("AuthFailure", status=401, times=times)
        elif fault is Fault.RATE_LIMITED:
            self.fake.fail_next("RequestLimitExceeded", status=503, times=times)
        elif fault is Fault.TRANSIENT:
            self.fake.fail_next("InternalError", status=500, times=times)

    def add_foreign(self) -> str:
        return self.fake.run_foreign()

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        self.fake.set_state(provider_id, raw)

    def calls(self) -> int:
        return self.fake.total_calls()


async def _harness(monkeypatch: pytest.MonkeyPatch, capacity: Capacity) -> AsyncIterator[ContractHarness]:
    set_fake_credentials(monkeypatch)
    with mock_aws():
        config = ProviderConfig(name="aws-test", type="aws", options={"region": REGION, "ami_id": BASE_AMI})
        provider = AwsEc2Provider(config, FakeClock())
        fake = FakeEc2()
        fake.attach(await provider.ensure_client())
        yield AwsHarness(provider, fake, capacity)
        await provider.aclose()


class TestAwsOnDemand(ProviderContract):
    @pytest.fixture
    async def harness(self, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ContractHarness]:
        async for h in _harness(monkeypatch, Capacity.ON_DEMAND):
            yield h


class TestAwsSpot(ProviderContract):
    @pytest.fixture
    async def harness(self, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ContractHarness]:
        async for h in _harness(monkeypatch, Capacity.SPOT):
            yield h
