"""The simulated cloud passes the same contract as every real adapter."""

from __future__ import annotations

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity
from scalectl.providers.errors import AuthFailed, InsufficientCapacity, RateLimited, Transient
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from tests.contract.suite import ContractHarness, Fault, ProviderContract


class SimulatedHarness(ContractHarness):
    def __init__(self, capacity: Capacity) -> None:
        self.clock = FakeClock()
        self.cloud = SimulatedCloud(ProviderConfig(name="simulated", type="simulated"), self.clock)
        self.provider = self.cloud
        self.capacity = capacity
        self.stoppable = False if capacity is Capacity.SPOT else None  # spot machines are not stopped

    async def make_running(self, provider_id: str) -> None:
        options = self.cloud.options
        self.clock.advance(max(options.provision_delay_max, options.resume_delay_max) + 1)

    def take_gpu(self, provider_id: str) -> None:
        self.cloud.set_capacity(self.gpu, 0, capacity=self.capacity)  # every such GPU is someone else's now

    def inject(self, fault: Fault, times: int = 1) -> None:
        errors = {
            Fault.NO_CAPACITY: ("create", InsufficientCapacity("no capacity", provider="simulated")),
            Fault.AUTH: ("*", AuthFailed("bad key", provider="simulated")),
            Fault.RATE_LIMITED: ("*", RateLimited("slow down", provider="simulated", retry_after=2.0)),
            Fault.TRANSIENT: ("*", Transient("503", provider="simulated")),
        }
        method, error = errors[fault]
        for m in ("create", "list", "offers", "get") if method == "*" else (method,):
            self.cloud.fail_next(m, error, times)

    def add_foreign(self) -> str:
        return self.cloud.add_foreign_instance("someone-elses-box")

    def set_raw_status(self, provider_id: str, raw: str) -> None:
        self.cloud.set_raw_status(provider_id, raw)

    def calls(self) -> int:
        return sum(self.cloud.calls.values())


class TestSimulatedOnDemand(ProviderContract):
    @pytest.fixture
    def harness(self) -> ContractHarness:
        return SimulatedHarness(Capacity.ON_DEMAND)


class TestSimulatedSpot(ProviderContract):
    @pytest.fixture
    def harness(self) -> ContractHarness:
        return SimulatedHarness(Capacity.SPOT)
