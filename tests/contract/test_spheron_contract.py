"""The Spheron adapter passes the shared provider contract against a local Spheron API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.spheron import SpheronProvider
from tests.contract.suite import ContractHarness, Fault, ProviderContract
from tests.fakes import Fault as ServerFault
from tests.fakes.spheron_server import API_KEY, SSH_KEY_ID, TEAM_ID, FakeSpheron, start_fake_spheron

_FAULTS = {
    Fault.NO_CAPACITY: ServerFault.NO_CAPACITY,
    Fault.AUTH: ServerFault.AUTH,
    Fault.RATE_LIMITED: ServerFault.RATE_LIMITED,
    Fault.TRANSIENT: ServerFault.SERVER_ERROR,
}


class SpheronHarness(ContractHarness):
    max_retries = 3

    def __init__(self, fake: FakeSpheron, provider: SpheronProvider, capacity: Capacity) -> None:
        self.fake = fake
        self.provider = provider
        self.capacity = capacity

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

    def seed_old(self, count: int) -> None:
        self.fake.seed_old(count, live_every=50)


async def spheron_harness(monkeypatch: pytest.MonkeyPatch, capacity: Capacity) -> AsyncIterator[SpheronHarness]:
    monkeypatch.setenv("SCALECTL_SPHERON_API_KEY", API_KEY)
    clock = FakeClock()
    # The contract exercises the happy path of delete; the 20-minute refusal is covered in the unit tests.
    fake, server = start_fake_spheron(clock, minimum_runtime_minutes=0)
    config = ProviderConfig(
        name="spheron",
        type="spheron",
        base_url=server.url,
        # Pages of 20 (the fake's maximum): listings of the 1,050-deployment account page 53 times. The
        # clock does not move during a contract test, so the documented request budget (kept in the
        # unit tests) is raised here.
        options={
            "team_id": TEAM_ID,
            "ssh_key_id": SSH_KEY_ID,
            "page_size": 20,
            "max_attempts": 4,
            "requests_per_15min": 10_000,
        },
    )
    provider = SpheronProvider(config, clock)
    try:
        yield SpheronHarness(fake, provider, capacity)
    finally:
        await provider.aclose()
        server.stop()


class TestSpheronOnDemand(ProviderContract):
    @pytest.fixture
    async def harness(self, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ContractHarness]:
        async for h in spheron_harness(monkeypatch, Capacity.ON_DEMAND):
            yield h


class TestSpheronSpot(ProviderContract):
    @pytest.fixture
    async def harness(self, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ContractHarness]:
        async for h in spheron_harness(monkeypatch, Capacity.SPOT):
            yield h
