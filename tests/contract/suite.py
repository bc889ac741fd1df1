"""The provider contract: every adapter, the simulated cloud included, passes these tests.

An adapter's test module subclasses ``ProviderContract`` and provides a ``harness`` fixture returning a
``ContractHarness`` wired to the adapter and to whatever stands behind it (a local HTTP server speaking the
provider's documented API, moto, or the simulated cloud itself).
"""

from __future__ import annotations

import abc
from enum import Enum

import pytest

from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Offer, Provider, ProviderInstance
from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    NotSupported,
    ProviderError,
    RateLimited,
    Transient,
)
from scalectl.sizing.server import ServerDescription

# What the controller launches: a server description, rendered by each adapter in its own bootstrap form.
SERVER = ServerDescription(
    model="meta-llama/Llama-3.1-8B-Instruct",
    args=("--max-model-len", "8192", "--max-num-seqs", "64"),
    image="vllm/vllm-openai:v0.17.1",
    secret_env=("HF_TOKEN",),
)


class Fault(Enum):
    NO_CAPACITY = "no-capacity"  # the next create fails for lack of machines
    AUTH = "auth"  # the next call fails authentication
    RATE_LIMITED = "rate-limited"  # the next call is throttled (with retry-after where the API has it)
    TRANSIENT = "transient"  # the next call fails with a 5xx / timeout


class ContractHarness(abc.ABC):
    provider: Provider
    key_prefix: str = "sct-"
    gpu: str = "H100-SXM5-80GB"
    capacity: Capacity = Capacity.ON_DEMAND
    max_retries: int = 0  # extra attempts the adapter makes on a retryable error
    # Whether this harness's instances can be stopped: None means as the adapter declares (``stop_start``);
    # False where the adapter can stop some instances but not these (interruptible ones).
    stoppable: bool | None = None
    # How a start shows that the GPU was taken meanwhile: "error" (InsufficientCapacity from ``start``),
    # or "stall" (``start`` answers, the instance stays PENDING: Vast.ai's "scheduling").
    resume_refusal: str = "error"

    def can_stop(self) -> bool:
        return self.provider.capabilities.stop_start if self.stoppable is None else self.stoppable

    def take_gpu(self, provider_id: str) -> None:
        """Someone else takes the GPU a stopped instance held, so that its next start finds none."""
        pytest.skip(f"{type(self).__name__} cannot take a stopped instance's GPU")

    @abc.abstractmethod
    async def make_running(self, provider_id: str) -> None:
        """Drive the backend until the instance reports RUNNING."""

    @abc.abstractmethod
    def inject(self, fault: Fault, times: int = 1) -> None:
        """Make the next ``times`` backend calls fail with ``fault``."""

    @abc.abstractmethod
    def add_foreign(self) -> str:
        """Create an instance in the same account that is not ours; return its provider id."""

    @abc.abstractmethod
    def set_raw_status(self, provider_id: str, raw: str) -> None:
        """Make the backend report ``raw`` as this instance's status."""

    @abc.abstractmethod
    def calls(self) -> int:
        """Backend calls received so far (HTTP requests, API calls)."""

    def seed_old(self, count: int) -> None:
        """Fill the account with ``count`` instances made (and mostly ended) long before ours, so that
        ours come last in the provider's listing. Backends that cannot hold that many skip the test."""
        pytest.skip(f"{type(self).__name__} cannot seed {count} old instances")


class ProviderContract:
    """Subclass with a ``harness`` fixture. Tests are async; pytest-asyncio runs them."""

    @pytest.fixture
    def harness(self) -> ContractHarness:  # pragma: no cover - overridden
        raise NotImplementedError

    async def _offer(self, h: ContractHarness) -> Offer:
        offers = await h.provider.offers(GpuRequest(gpu=h.gpu, capacity=h.capacity))
        assert offers, f"{h.provider.name} has no {h.capacity} offer for {h.gpu}"
        return next(o for o in offers if o.available)

    async def _create(self, h: ContractHarness, key: str) -> ProviderInstance:
        offer = await self._offer(h)
        return await h.provider.create(LaunchSpec(key=key, tier="contract", offer=offer, capacity=h.capacity))

    async def test_a_launch_with_a_server_description_is_rendered_and_accepted(self, harness: ContractHarness) -> None:
        offer = await self._offer(harness)
        key = f"{harness.key_prefix}server-1"
        spec = LaunchSpec(key=key, tier="contract", offer=offer, capacity=harness.capacity, server=SERVER)
        created = await harness.provider.create(spec)  # the backend validates the rendered form it receives
        assert created.key == key
        assert (await harness.provider.get(created.provider_id)).key == key

    async def test_declared_capabilities_match_what_is_offered(self, harness: ContractHarness) -> None:
        caps = harness.provider.capabilities
        offers = await harness.provider.offers(GpuRequest(gpu=harness.gpu))
        assert offers
        if not caps.spot:
            assert all(o.spot_per_hour is None for o in offers), "spot prices from a provider declaring no spot"
        if harness.capacity is Capacity.SPOT:
            assert caps.spot

    async def test_offers_are_typed_and_priced(self, harness: ContractHarness) -> None:
        offers = await harness.provider.offers(GpuRequest(gpu=harness.gpu, capacity=harness.capacity))
        assert offers
        for offer in offers:
            assert isinstance(offer, Offer)
            assert offer.provider == harness.provider.name
            assert offer.gpu_count >= 1
            price = offer.price(harness.capacity)
            assert price is not None and price > 0

    async def test_unknown_gpu_has_no_offers(self, harness: ContractHarness) -> None:
        assert await harness.provider.offers(GpuRequest(gpu="no-such-gpu-9000")) == []

    async def test_create_returns_fast_and_get_finds_it(self, harness: ContractHarness) -> None:
        created = await self._create(harness, f"{harness.key_prefix}create-1")
        assert created.key == f"{harness.key_prefix}create-1"
        assert created.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING)
        got = await harness.provider.get(created.provider_id)
        assert got.provider_id == created.provider_id
        assert got.key == created.key
        await harness.make_running(created.provider_id)
        assert (await harness.provider.get(created.provider_id)).status is InstanceStatus.RUNNING

    async def test_create_is_idempotent_by_key(self, harness: ContractHarness) -> None:
        first = await self._create(harness, f"{harness.key_prefix}idem-1")
        second = await self._create(harness, f"{harness.key_prefix}idem-1")
        assert second.provider_id == first.provider_id
        ours = [i for i in await harness.provider.list(harness.key_prefix) if i.key == f"{harness.key_prefix}idem-1"]
        assert len(ours) == 1

    async def test_list_finds_ours_only(self, harness: ContractHarness) -> None:
        mine = await self._create(harness, f"{harness.key_prefix}list-1")
        other_prefix = await self._create(harness, "zz-other-list-1")
        foreign = harness.add_foreign()
        listed = {i.provider_id: i for i in await harness.provider.list(harness.key_prefix)}
        assert mine.provider_id in listed
        assert listed[mine.provider_id].key == f"{harness.key_prefix}list-1"
        assert other_prefix.provider_id not in listed
        assert foreign not in listed

    async def test_list_finds_ours_on_the_last_page_of_an_account_with_over_1000_instances(
        self, harness: ContractHarness
    ) -> None:
        harness.seed_old(1_050)
        mine = await self._create(harness, f"{harness.key_prefix}last-1")  # the newest: listed last
        listed = {i.provider_id: i for i in await harness.provider.list(harness.key_prefix)}
        assert list(listed) == [mine.provider_id]
        assert listed[mine.provider_id].key == f"{harness.key_prefix}last-1"

    async def test_delete_is_idempotent(self, harness: ContractHarness) -> None:
        created = await self._create(harness, f"{harness.key_prefix}del-1")
        await harness.provider.delete(created.provider_id)
        await harness.provider.delete(created.provider_id)  # already gone: success
        try:
            after = await harness.provider.get(created.provider_id)
        except InstanceNotFound:
            pass
        else:
            assert after.status in (InstanceStatus.TERMINATED, InstanceStatus.STOPPING)
        assert created.provider_id not in {
            i.provider_id for i in await harness.provider.list(harness.key_prefix) if not i.status.is_gone
        }

    async def test_get_unknown_raises_not_found(self, harness: ContractHarness) -> None:
        with pytest.raises(InstanceNotFound):
            await harness.provider.get("does-not-exist-424242")

    async def test_no_capacity_maps_and_is_not_retried(self, harness: ContractHarness) -> None:
        offer = await self._offer(harness)
        harness.inject(Fault.NO_CAPACITY)
        before = harness.calls()
        spec = LaunchSpec(key=f"{harness.key_prefix}cap-1", tier="contract", offer=offer, capacity=harness.capacity)
        with pytest.raises(InsufficientCapacity) as info:
            await harness.provider.create(spec)
        assert not info.value.retryable
        assert harness.calls() - before <= 2  # the create (and at most one idempotency lookup)

    async def test_auth_failure_maps_and_is_not_retried(self, harness: ContractHarness) -> None:
        harness.inject(Fault.AUTH)
        before = harness.calls()
        with pytest.raises(AuthFailed) as info:
            await harness.provider.list(harness.key_prefix)
        assert harness.calls() - before == 1
        assert "secret" not in str(info.value).lower() or "***" in str(info.value)

    async def test_transient_errors_are_retried_then_stop(self, harness: ContractHarness) -> None:
        harness.inject(Fault.TRANSIENT, times=1)
        if harness.max_retries >= 1:
            await harness.provider.list(harness.key_prefix)  # one failure, then success
        else:
            with pytest.raises(Transient):
                await harness.provider.list(harness.key_prefix)
        harness.inject(Fault.TRANSIENT, times=harness.max_retries + 5)
        before = harness.calls()
        with pytest.raises(Transient):
            await harness.provider.list(harness.key_prefix)
        assert harness.calls() - before == harness.max_retries + 1  # bounded: retries stop

    async def test_rate_limit_maps_with_retry_after(self, harness: ContractHarness) -> None:
        harness.inject(Fault.RATE_LIMITED, times=harness.max_retries + 5)
        before = harness.calls()
        with pytest.raises(RateLimited) as info:
            await harness.provider.list(harness.key_prefix)
        assert info.value.retryable
        assert harness.calls() - before == harness.max_retries + 1

    async def test_unexpected_status_is_unknown(self, harness: ContractHarness) -> None:
        created = await self._create(harness, f"{harness.key_prefix}status-1")
        harness.set_raw_status(created.provider_id, "some-new-state-we-never-saw")
        got = await harness.provider.get(created.provider_id)
        assert got.status is InstanceStatus.UNKNOWN

    async def test_errors_are_in_the_taxonomy(self, harness: ContractHarness) -> None:
        harness.inject(Fault.TRANSIENT, times=harness.max_retries + 1)
        with pytest.raises(ProviderError):
            await harness.provider.offers(GpuRequest(gpu=harness.gpu, capacity=harness.capacity))

    # ---- stop and start -------------------------------------------------------------------------------
    async def _running(self, h: ContractHarness, key: str) -> ProviderInstance:
        created = await self._create(h, key)
        await h.make_running(created.provider_id)
        return created

    async def test_stop_keeps_the_instance_and_start_brings_it_back(self, harness: ContractHarness) -> None:
        if not harness.can_stop():
            pytest.skip("not stoppable here: see the refusal test")
        created = await self._running(harness, f"{harness.key_prefix}stop-1")
        await harness.provider.stop(created.provider_id)
        await harness.provider.stop(created.provider_id)  # already stopped: success
        stopped = await harness.provider.get(created.provider_id)
        assert stopped.status is InstanceStatus.STOPPED
        assert stopped.address is None
        listed = {i.provider_id: i for i in await harness.provider.list(harness.key_prefix)}
        assert listed[created.provider_id].status is InstanceStatus.STOPPED  # kept, not gone
        assert listed[created.provider_id].key == created.key
        await harness.provider.start(created.provider_id)
        assert (await harness.provider.get(created.provider_id)).status in (
            InstanceStatus.PENDING,
            InstanceStatus.RUNNING,
        )
        await harness.provider.start(created.provider_id)  # already starting: success
        await harness.make_running(created.provider_id)
        assert (await harness.provider.get(created.provider_id)).status is InstanceStatus.RUNNING

    async def test_a_start_that_finds_the_gpu_taken_says_so(self, harness: ContractHarness) -> None:
        if not harness.can_stop() or not harness.provider.capabilities.resume_may_fail_no_capacity:
            pytest.skip("no stop, or a start that cannot find the GPU taken")
        created = await self._running(harness, f"{harness.key_prefix}taken-1")
        await harness.provider.stop(created.provider_id)
        harness.take_gpu(created.provider_id)
        if harness.resume_refusal == "error":
            with pytest.raises(InsufficientCapacity) as info:
                await harness.provider.start(created.provider_id)
            assert not info.value.retryable
            assert (await harness.provider.get(created.provider_id)).status is InstanceStatus.STOPPED
        else:
            await harness.provider.start(created.provider_id)
            assert (await harness.provider.get(created.provider_id)).status is InstanceStatus.PENDING

    async def test_stop_of_an_unknown_instance_raises_not_found(self, harness: ContractHarness) -> None:
        if not harness.can_stop():
            pytest.skip("not stoppable here: see the refusal test")
        with pytest.raises(InstanceNotFound):
            await harness.provider.stop("does-not-exist-424242")
        with pytest.raises(InstanceNotFound):
            await harness.provider.start("does-not-exist-424242")

    async def test_stop_is_refused_cleanly_where_the_cloud_has_none(self, harness: ContractHarness) -> None:
        if harness.can_stop():
            pytest.skip("stoppable: see the stop/start tests")
        created = await self._running(harness, f"{harness.key_prefix}nostop-1")
        before = harness.calls()
        for operation in (harness.provider.stop, harness.provider.start):
            with pytest.raises(NotSupported) as info:
                await operation(created.provider_id)
            assert not info.value.retryable
            assert "not supported" in str(info.value)
        assert harness.calls() - before <= 2  # at most a look-up each: no stop or start was sent
        assert (await harness.provider.get(created.provider_id)).status is InstanceStatus.RUNNING
