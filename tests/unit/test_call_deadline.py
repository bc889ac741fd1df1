"""Provider call deadlines: a call past its deadline is cut, and the account is then *silent* — its calls
fail at once and one read at a time asks again in the background — until a probe answers.

Hang guards only: every wait here is a deadline the test sets, never a measured speed."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from scalectl.clocks import FakeClock
from scalectl.controller.call_deadline import DeadlineProvider, NoAnswer
from scalectl.controller.provider_proxy import as_provider
from scalectl.providers.base import Capacity, GpuRequest, LaunchSpec
from scalectl.providers.errors import CreateUnconfirmed
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.simulated import SimulatedCloud
from tests.fakes.hanging_provider import HangingProvider


async def _started() -> None:
    """Let tasks just scheduled run up to their first real wait (a few loop turns, no time)."""
    for _ in range(10):
        await asyncio.sleep(0)


def _wrapped(deadline: float) -> tuple[FakeClock, HangingProvider, DeadlineProvider]:
    clock = FakeClock()
    inner = HangingProvider(SimulatedCloud(ProviderConfig(name="a", type="simulated"), clock))
    inner.hang = True
    return clock, inner, DeadlineProvider(as_provider(inner), deadline, clock)


async def test_a_call_past_its_deadline_is_cut_and_the_account_falls_silent() -> None:
    _clock, inner, provider = _wrapped(0.05)
    with pytest.raises(NoAnswer, match=r"list: no answer within 0\.05s"):
        await provider.list("sc-")
    assert provider.silent and inner.started == ["list"] and inner.in_flight == 0


async def test_a_silent_account_is_not_waited_on_again_however_long_ago_it_missed() -> None:
    """The old rule let calls through again one deadline after a miss, and each of those waited out a
    deadline of its own: a hung account cost every other tick a full deadline."""
    clock, inner, provider = _wrapped(0.05)
    with pytest.raises(NoAnswer):
        await provider.list("sc-")
    clock.advance(3600)  # long past any quiet window, on the clock the wrapper reads
    provider.deadline = 30.0  # a call that waited now would wait 30 s: the answer below is at once
    with pytest.raises(NoAnswer, match="list not sent: the API has not answered within 30s"):
        await provider.list("sc-")
    await _started()  # the probe's task runs up to the API
    assert inner.started == ["list", "list"] and inner.in_flight == 1  # the same read, asked in the background
    with pytest.raises(NoAnswer, match="not sent"):
        await provider.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1))
    with pytest.raises(NoAnswer, match="not sent"):
        await provider.delete("sim-a-000001")
    await _started()
    assert inner.started == ["list", "list"]  # one probe at a time, and nothing that acts goes out
    await provider.aclose()


async def test_a_probe_that_answers_lets_the_calls_through_again() -> None:
    _clock, inner, provider = _wrapped(0.05)
    with pytest.raises(NoAnswer):
        await provider.list("sc-")
    provider.deadline = 30.0
    with pytest.raises(NoAnswer, match="not sent"):
        await provider.list("sc-")  # starts the probe
    probe = provider._probe
    assert probe is not None
    inner.hang = False  # the API answers again
    await probe
    assert not provider.silent
    assert await provider.list("sc-") == []
    assert inner.started == ["list", "list", "list"]


async def test_a_probe_past_the_deadline_leaves_the_account_silent_and_the_next_read_asks_again() -> None:
    _clock, inner, provider = _wrapped(0.05)
    with pytest.raises(NoAnswer):
        await provider.list("sc-")
    with pytest.raises(NoAnswer, match="not sent"):
        await provider.list("sc-")
    probe = provider._probe
    assert probe is not None
    await probe  # cut at its deadline
    assert provider.silent and inner.in_flight == 0
    with pytest.raises(NoAnswer, match="not sent"):
        await provider.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1))
    await _started()
    assert inner.started == ["list", "list", "offers"]
    await provider.aclose()


async def _spec(provider: DeadlineProvider) -> LaunchSpec:
    offer = (await provider.inner.offers(GpuRequest(gpu="H100-SXM5-80GB", count=1)))[0]
    return LaunchSpec(key="sc-web-0001", tier="web", offer=offer, capacity=Capacity.ON_DEMAND)


async def test_a_create_cut_by_its_deadline_is_unconfirmed_until_the_listing_lag_has_passed() -> None:
    """It may be at the provider (made, answered late): answered as a create whose answer was lost, so the
    reconciler keeps the row, adopts the machine when listed and sends no create for the key before the
    provider's listing lag, on the world's clock (the reconciler's; an accelerated demo's). It was a
    retryable ``NoAnswer``, and the reconciler sent the create again under the same key 5 s later."""
    real, inner, _ = _wrapped(0.05)
    world = FakeClock(start=2_000_000_000.0)
    inner.hang = False
    provider = DeadlineProvider(as_provider(inner), 0.05, real, world)
    spec = await _spec(provider)
    inner.capabilities = dataclasses.replace(inner.capabilities, listing_lag=30.0)  # as a lagging cloud declares
    inner.hang = True
    with pytest.raises(CreateUnconfirmed, match=r"create: no answer within 0\.05s") as cut:
        await provider.create(spec)
    assert cut.value.settles_at == world.now() + 30.0 and not cut.value.retryable
    assert provider.silent and inner.started[-1] == "create" and inner.in_flight == 0
    # While the account is silent a create is not sent at all: an ordinary retryable error, nothing unknown.
    with pytest.raises(NoAnswer, match="create not sent") as refused:
        await provider.create(spec)
    assert refused.value.retryable and inner.started.count("create") == 1
    await provider.aclose()
