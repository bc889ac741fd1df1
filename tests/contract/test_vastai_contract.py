"""The Vast.ai adapter passes the shared provider contract against a local Vast.ai over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.vastai import VastAIProvider
from tests.contract.suite import ContractHarness, Fault, ProviderContract
from tests.fakes import Fault as ServerFault
from tests.fakes.vastai_server import VastFake, serve_vast

KEY_ENV = "SCALECTL_TEST_VASTAI_KEY"
_FAULTS = {
    Fault.AUTH: ServerFault.AUTH,
    Fault.RATE_LIMITED: ServerFault.RATE_LIMITED,
    Fault.TRANSIENT: ServerFault.SERVER_ERROR,
}


class VastHarness(ContractHarness):
    def __init__(self, fake: VastFake, url: str, capacity: Capacity) -> None:
        self.fake = fake
        self.capacity = capacity
        self.gpu = "H100-SXM5-80GB"
        self.clock = FakeClock()
        config = ProviderConfig(
            name="vast-test",
            type="vastai",
            base_url=url,
            api_key_env=KEY_ENV,
            options={"default_image": "vllm/vllm-openai:v0.8.5"},
        )
        self.provider = self.vast = VastAIProvider(config, self.clock)
        self.max_retries = self.vast.max_retries
        self.resume_refusal = "stall"  # Vast's start answers success and the instance waits in "scheduling"

    def take_gpu(self, provider_id: str) -> None:
        self.fake.take_gpu(provider_id)

    async def make_running(self, provider_id: str) -> None:
        self.fake.make_running(provider_id)

    def inject(self, fault: Fault, times: int = 1) -> None:
        if fault is Fault.NO_CAPACITY:
            self.fake.fail_capacity_next(times)
        else:
            self.fake.faults.add(_FAULTS[fault], times)

    def add_foreign(self) -> str:
        return self.fake.add_foreign()

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        self.fake.set_raw_status(provider_id, raw)

    def calls(self) -> int:
        return self.fake.calls

    def seed_old(self, count: int) -> None:
        self.fake.seed_old(count)


@pytest.fixture(scope="module")
def vast_fake() -> Iterator[tuple[VastFake, str]]:
    with serve_vast() as served:
        yield served


@pytest.fixture
def vast_env(monkeypatch: pytest.MonkeyPatch, vast_fake: tuple[VastFake, str]) -> tuple[VastFake, str]:
    fake, url = vast_fake
    fake.reset()
    monkeypatch.setenv(KEY_ENV, fake.api_key)
    return fake, url


class TestVastOnDemand(ProviderContract):
    @pytest.fixture
    async def harness(self, vast_env: tuple[VastFake, str]) -> AsyncIterator[ContractHarness]:
        h = VastHarness(*vast_env, Capacity.ON_DEMAND)
        yield h
        await h.provider.aclose()


class TestVastSpot(ProviderContract):
    @pytest.fixture
    async def harness(self, vast_env: tuple[VastFake, str]) -> AsyncIterator[ContractHarness]:
        h = VastHarness(*vast_env, Capacity.SPOT)
        yield h
        await h.provider.aclose()
