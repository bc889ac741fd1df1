"""The Lambda Cloud adapter passes the shared provider contract against a local Lambda API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity
from scalectl.providers.lambda_cloud import LambdaProvider
from scalectl.providers.registry import ProviderConfig
from tests.contract.suite import ContractHarness, Fault, ProviderContract
from tests.fakes import Fault as ServerFault
from tests.fakes.lambda_server import API_KEY, SSH_KEY_NAME, FakeLambda, start_fake_lambda

_FAULTS = {
    Fault.NO_CAPACITY: ServerFault.NO_CAPACITY,
    Fault.AUTH: ServerFault.AUTH,
    Fault.RATE_LIMITED: ServerFault.RATE_LIMITED,
    Fault.TRANSIENT: ServerFault.SERVER_ERROR,
}


class LambdaHarness(ContractHarness):
    max_retries = 3
    capacity = Capacity.ON_DEMAND  # Lambda sells no spot

    def __init__(self, fake: FakeLambda, provider: LambdaProvider) -> None:
        self.fake = fake
        self.provider = provider

    async def make_running(self, provider_id: str) -> None:
        self.fake.make_running(provider_id)

    def inject(self, fault: Fault, times: int = 1) -> None:
        self.fake.faults.add(_FAULTS[fault], times)

    def add_foreign(self) -> str:
        return self.fake.add_foreign("someone-elses-box")

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        self.fake.set_status(provider_id, raw)

    def calls(self) -> int:
        return self.fake.calls


class TestLambdaOnDemand(ProviderContract):
    @pytest.fixture
    async def harness(self, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ContractHarness]:
        monkeypatch.setenv("SCALECTL_LAMBDA_API_KEY", API_KEY)
        clock = FakeClock()
        fake, server = start_fake_lambda(clock)  # enforces 1 launch / 12 s and 1 request / s
        config = ProviderConfig(
            name="lambda",
            type="lambda",
            base_url=f"{server.url}/api/v1",
            options={"ssh_key_name": SSH_KEY_NAME, "max_attempts": 4},
        )
        provider = LambdaProvider(config, clock)
        try:
            yield LambdaHarness(fake, provider)
        finally:
            await provider.aclose()
            server.stop()
        assert fake.throttled == 0  # the adapter's pacing kept it under both documented limits
