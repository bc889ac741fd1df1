"""The shared HTTP client: retry-after parsing, status mapping, key handling and redaction over loopback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scalectl.clocks import FakeClock
from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InvalidRequest,
    ProviderError,
    RateLimited,
    Transient,
)
from scalectl.providers.http import ApiClient, ApiKey, HttpFailure, RetryPolicy, classify_status, retry_after_from
from scalectl.providers.registry import ProviderConfig
from tests.fakes import LoopbackServer

KEY_ENV = "SCALECTL_TEST_HTTP_KEY"
KEY = "sk-test-0123456789abcdef"


def test_retry_after_seconds_date_and_ratelimit_headers() -> None:
    now = 1_767_225_600.0
    later = format_datetime(datetime.fromtimestamp(now + 42, UTC), usegmt=True)
    assert retry_after_from({"retry-after": "7"}, now) == 7.0
    assert retry_after_from({"retry-after": later}, now) == pytest.approx(42.0)
    assert retry_after_from({"ratelimit-reset": "5"}, now) == 5.0
    assert retry_after_from({"ratelimit": "limit=60, remaining=0, reset=3"}, now) == 3.0
    assert retry_after_from({"retry-after": "soon"}, now) is None
    assert retry_after_from({}, now) is None


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, AuthFailed), (403, AuthFailed), (404, InstanceNotFound), (408, Transient), (422, InvalidRequest),
     (429, RateLimited), (500, Transient), (503, Transient)],
)  # fmt: skip
def test_classify_status(status: int, expected: type[ProviderError]) -> None:
    failure = HttpFailure(method="GET", path="/x", status=status, body=None, retry_after=None)
    error = classify_status(failure, "p", "", credential_hint="the environment variable X", rate_limit_wait=4.0)
    assert type(error) is expected
    if status == 429:
        assert error.retry_after == 4.0  # the fallback when the headers name no wait
    if status in (401, 403):
        assert "the environment variable X" in str(error)


def test_api_key_names_where_it_is_read_and_never_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    key = ApiKey(ProviderConfig(name="p", type="acme", api_key_env=KEY_ENV))
    with pytest.raises(AuthFailed, match=KEY_ENV):
        key.load()
    monkeypatch.setenv(KEY_ENV, KEY)
    assert key.load().reveal() == KEY
    assert KEY not in repr(key) and KEY not in key.redact(f"echo {KEY}")
    assert ApiKey(ProviderConfig(name="p", type="acme")).env == "SCALECTL_ACME_API_KEY"


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    """Answers 400 with the Authorization header echoed back, and 429 with a Retry-After."""

    async def echo(request: Request) -> Response:
        return JSONResponse({"error": f"bad request from {request.headers.get('authorization')}"}, 400)

    async def limited(request: Request) -> Response:
        return JSONResponse({"error": "slow down"}, 429, headers={"Retry-After": "90"})

    app = Starlette(routes=[Route("/echo", echo, methods=["GET"]), Route("/limited", limited, methods=["GET"])])
    with LoopbackServer(app) as server:
        yield server.url


def client(url: str, clock: FakeClock, retry: RetryPolicy | None = None) -> ApiClient:
    key = ApiKey(ProviderConfig(name="p", type="acme", api_key_env=KEY_ENV))

    def map_error(failure: HttpFailure) -> ProviderError:
        return classify_status(failure, "p", failure.message("error"))

    return ApiClient(provider="p", base_url=url, key=key, map_error=map_error, clock=clock, retry=retry)


async def test_an_echoed_key_is_redacted_before_anyone_sees_it(
    echo_server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, KEY)
    api = client(echo_server, FakeClock())
    try:
        with pytest.raises(InvalidRequest) as info:
            await api.request("GET", "/echo")
    finally:
        await api.aclose()
    assert "Bearer ***" in str(info.value)
    for text in (str(info.value), repr(info.value), repr(api), caplog.text):
        assert KEY not in text


async def test_a_wait_beyond_the_cap_is_not_shortened(echo_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    clock = FakeClock()
    api = client(echo_server, clock, RetryPolicy(max_attempts=3, max_retry_after=60.0))
    start = clock.now()
    try:
        with pytest.raises(RateLimited) as info:
            await api.request("GET", "/limited")
        assert info.value.retry_after == 90.0  # what the provider said is reported as is...
        assert clock.now() == start  # ...and not waited (shortened) inside the call: the account pauses
        assert api.paused_for() == pytest.approx(90.0)
    finally:
        await api.aclose()
