"""The RunPod adapter passes the shared provider contract against a local RunPod over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec, ProviderInstance
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.runpod import RunPodProvider
from scalectl.sizing.server import ServerDescription
from tests.contract.suite import ContractHarness, Fault, ProviderContract
from tests.fakes import Fault as ServerFault
from tests.fakes.runpod_server import RunPodFake, serve_runpod

KEY_ENV = "SCALECTL_TEST_RUNPOD_KEY"
_FAULTS = {
    Fault.AUTH: ServerFault.AUTH,
    Fault.RATE_LIMITED: ServerFault.RATE_LIMITED,
    Fault.TRANSIENT: ServerFault.SERVER_ERROR,
}


class RunPodHarness(ContractHarness):
    def __init__(self, fake: RunPodFake, url: str, capacity: Capacity) -> None:
        self.fake = fake
        self.capacity = capacity
        self.gpu = "H100-SXM5-80GB"
        self.clock = FakeClock()
        config = ProviderConfig(
            name="runpod-test",
            type="runpod",
            base_url=url,
            api_key_env=KEY_ENV,
            options={"default_image": "vllm/vllm-openai:v0.8.5"},
        )
        self.provider = self.runpod = RunPodProvider(config, self.clock)
        self.max_retries = self.runpod.max_retries
        self.stoppable = False if capacity is Capacity.SPOT else None  # interruptible pods are not stopped

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

    async def launch(self, key: str) -> ProviderInstance:
        offers = await self.provider.offers(GpuRequest(gpu=self.gpu, capacity=self.capacity))
        spec = LaunchSpec(key=key, tier="t", offer=offers[0], capacity=self.capacity, server=SERVER)
        return await self.provider.create(spec)


SERVER = ServerDescription(model="m", args=(), image="vllm/vllm-openai:v0.8.5", cache_dir="/cache")


@pytest.fixture(scope="module")
def runpod_fake() -> Iterator[tuple[RunPodFake, str]]:
    with serve_runpod() as served:
        yield served


@pytest.fixture
def runpod_env(monkeypatch: pytest.MonkeyPatch, runpod_fake: tuple[RunPodFake, str]) -> tuple[RunPodFake, str]:
    fake, url = runpod_fake
    fake.reset()
    monkeypatch.setenv(KEY_ENV, fake.api_key)
    return fake, url


class TestRunPodOnDemand(ProviderContract):
    @pytest.fixture
    async def harness(self, runpod_env: tuple[RunPodFake, str]) -> AsyncIterator[ContractHarness]:
        h = RunPodHarness(*runpod_env, Capacity.ON_DEMAND)
        yield h
        await h.provider.aclose()


class TestRunPodSpot(ProviderContract):
    @pytest.fixture
    async def harness(self, runpod_env: tuple[RunPodFake, str]) -> AsyncIterator[ContractHarness]:
        h = RunPodHarness(*runpod_env, Capacity.SPOT)
        yield h
        await h.provider.aclose()
