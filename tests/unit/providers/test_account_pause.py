"""A provider's Retry-After holds its whole account: every caller, every later tick, for all of it.

Measured before: three 429s with ``Retry-After: 120`` let 23-24 requests through inside the 120 s (the wait
was honoured only inside the one call that got it, capped at 30 s, and parallel look-ups all went out)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import FakeClock
from scalectl.providers.errors import ProviderError, RateLimited
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status
from scalectl.providers.registry import ProviderConfig
from tests.fakes import LoopbackServer

KEY_ENV = "SCALECTL_TEST_PAUSE_KEY"


class Limited:
    """Answers 429 with ``Retry-After: 120`` the first ``times`` requests, then 200; counts every request."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.requests = 0

    async def handle(self, _: Request) -> Response:
        self.requests += 1
        if self.requests <= self.times:
            return JSONResponse({"error": "slow down"}, 429, headers={"Retry-After": "120"})
        return JSONResponse({"ok": True})


@pytest.fixture
def limited() -> Iterator[tuple[Limited, str]]:
    server = Limited(times=3)
    app = Starlette(routes=[Route("/{path:path}", server.handle, methods=["GET", "POST"])])
    with LoopbackServer(app) as loopback:
        yield server, loopback.url


def account(url: str, clock: FakeClock) -> ApiClient:
    key = ApiKey(ProviderConfig(name="acct", type="acme", api_key_env=KEY_ENV))

    def map_error(failure: HttpFailure) -> ProviderError:
        return classify_status(failure, "acct", failure.message("error"))

    # The adapters' default: waits up to 30 s are taken inside a call.
    retry = RetryPolicy(max_attempts=4, max_retry_after=30.0)
    return ApiClient(provider="acct", base_url=url, key=key, map_error=map_error, clock=clock, retry=retry)


async def test_no_request_reaches_the_account_inside_its_retry_after(
    limited: tuple[Limited, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "k-123")
    server, url = limited
    clock = FakeClock()
    api = account(url, clock)
    try:
        with pytest.raises(RateLimited) as first:
            await api.request("GET", "/instances")
        assert first.value.retry_after == 120.0
        assert server.requests == 1
        for _tick in range(8):  # ticks every 10 s, four concurrent callers each (list, offers, gets)
            clock.advance(10.0)
            answers = await asyncio.gather(
                *(api.request("GET", f"/call/{i}") for i in range(4)), return_exceptions=True
            )
            assert all(isinstance(a, RateLimited) for a in answers)
        assert server.requests == 1  # nothing sent for 80 s, whoever asked
        clock.advance(40.0)  # 120 s: the window is over; the second of the three 429s pauses it again
        with pytest.raises(RateLimited):
            await api.request("GET", "/instances")
        assert server.requests == 2
        clock.advance(89.0)
        with pytest.raises(RateLimited):
            await api.request("GET", "/instances")
        assert server.requests == 2
    finally:
        await api.aclose()


async def test_a_short_retry_after_is_waited_inside_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "k-123")
    calls = 0

    async def once_limited(_: Request) -> Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return JSONResponse({"error": "slow down"}, 429, headers={"Retry-After": "7"})
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/x", once_limited)])
    clock = FakeClock()
    with LoopbackServer(app) as loopback:
        api = account(loopback.url, clock)
        try:
            start = clock.now()
            assert await api.request("GET", "/x") == {"ok": True}
            assert clock.now() - start == pytest.approx(7.0)  # all of it, no less
            assert calls == 2
        finally:
            await api.aclose()
