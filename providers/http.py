"""Shared HTTP plumbing for cloud adapters: one httpx client, an error-mapping hook, bounded retries.

An adapter gives a base URL, auth headers and a function that turns a failed response into one of
the taxonomy's errors; ``ApiClient`` does the rest. Retries run only for retryable errors (5xx,
timeouts, 429), are bounded, use jittered exponential backoff and honour a provider's retry-after,
capped. All waiting goes through the injected clock, so tests never sleep for real.

Logs carry method, path and status only: never headers (the credential rides in them) or bodies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from clocks import Clock
from providers.errors import AuthFailed, ProviderError, RateLimited, Transient
from providers.registry import ProviderConfig
from providers.secrets import MissingCredential, Secret, load_secret

log = logging.getLogger(__name__)

T = TypeVar("T")

# (response, parsed body: JSON value, text, or None) -> the taxonomy error to raise
ErrorMapper = Callable[[httpx.Response, Any], ProviderError]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try. ``max_attempts`` counts the first try; waits are capped at ``max_wait``."""

    max_attempts: int = 4
    base_wait: float = 0.5
    max_wait: float = 30.0
    retry_on: tuple[type[ProviderError], ...] = (Transient, RateLimited)

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1


class Pacer:
    """Spaces calls at least ``interval`` seconds apart on the injected clock. It waits, never refuses.

    Used where a provider documents a request rate (Lambda: one launch per 12 s): respecting the
    limit up front beats collecting 429s. ``ApiClient`` marks every pacer of a request at the moment
    it is sent, so two pacers (all requests, launches) never undercut each other.
    """

    def __init__(self, clock: Clock, interval: float):
        self._clock = clock
        self.interval = interval
        self._last: float | None = None

    def remaining(self) -> float:
        if self._last is None:
            return 0.0
        return max(0.0, self._last + self.interval - self._clock.monotonic())

    def mark(self) -> None:
        self._last = self._clock.monotonic()


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form); None when absent or unparseable."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # HTTP-date form: not worth a wall-clock read here; the backoff takes over
    return max(0.0, seconds)


class ApiClient:
    """One ``httpx.AsyncClient`` per provider instance, with error mapping and a retry policy."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        clock: Clock,
        map_error: ErrorMapper,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        pacer: Pacer | None = None,
        auth: httpx.Auth | None = None,
    ):
        self.provider = provider
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self._map_error = map_error
        self._pacer = pacer
        self._pace_lock = asyncio.Lock()
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Accept": "application/json", "User-Agent": "scalectl", **headers},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            auth=auth,
            follow_redirects=True,
        )

    def __repr__(self) -> str:
        return f"ApiClient(provider={self.provider!r}, base_url={str(self._client.base_url)!r})"

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        retry: bool = True,
        pacer: Pacer | None = None,
    ) -> Any:
        """Send a request and return its parsed JSON body (None when empty). Raises ProviderError.

        ``pacer`` adds a per-operation rate (e.g. launches) on top of the client-wide one.
        """
        if not retry:
            return await self.send_once(method, path, params=params, json=json, pacer=pacer)
        return await self.retrying(lambda: self.send_once(method, path, params=params, json=json, pacer=pacer))

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` under the retry policy (also for composite operations like lookup-then-create)."""
        policy = self.retry
        retrier = AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda exc: isinstance(exc, policy.retry_on)),
            sleep=self.clock.sleep,
            reraise=True,
        )
        async for state in retrier:
            with state:
                return await attempt()
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(exc.retry_after, self.retry.max_wait)  # the provider said when; capped
        backoff = wait_random_exponential(multiplier=self.retry.base_wait, max=self.retry.max_wait)
        return float(backoff(state))

    async def send_once(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        pacer: Pacer | None = None,
    ) -> Any:
        await self._pace([p for p in (self._pacer, pacer) if p is not None])
        try:
            response = await self._client.request(method, path, params=params, json=json)
        except httpx.TimeoutException as exc:
            raise Transient(f"{method} {path}: timed out ({type(exc).__name__})", provider=self.provider) from None
        except httpx.TransportError as exc:
            raise Transient(f"{method} {path}: {type(exc).__name__}", provider=self.provider) from None
        log.debug("%s %s %s -> %s", self.provider, method, path, response.status_code)
        body = _parse_body(response)
        if response.is_success:
            return body
        raise self._map_error(response, body)

    async def _pace(self, pacers: list[Pacer]) -> None:
        """Wait until every pacer allows a call, then mark them all: the request goes out now."""
        if not pacers:
            return
        async with self._pace_lock:
            for pacer in pacers:  # time only moves forward, so each stays satisfied once it is
                delay = pacer.remaining()
                if delay > 0:
                    await self.clock.sleep(delay)
            for pacer in pacers:
                pacer.mark()

    async def aclose(self) -> None:
        await self._client.aclose()


def _parse_body(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def default_status_error(
    response: httpx.Response, message: str, *, provider: str, credential_hint: str, retry_after: float | None = None
) -> ProviderError | None:
    """The mapping every HTTP API shares: 401/403, 429 and 5xx. None means "the adapter decides"."""
    status = response.status_code
    where = f"{response.request.method} {response.request.url.path}"
    if status in (401, 403):
        return AuthFailed(f"{where}: credentials rejected (HTTP {status}); {credential_hint}", provider=provider)
    if status == 429:
        wait = parse_retry_after(response.headers.get("Retry-After"))
        wait = wait if wait is not None else retry_after
        return RateLimited(f"{where}: rate limited: {message}", provider=provider, retry_after=wait)
    if status >= 500:
        return Transient(f"{where}: HTTP {status}: {message}", provider=provider)
    return None


def default_key_env(provider_type: str) -> str:
    return f"SCALECTL_{provider_type.upper()}_API_KEY"


def load_api_key(config: ProviderConfig) -> tuple[Secret, str]:
    """The API key and a hint naming where it came from (for error messages; never the value).

    Missing credentials raise AuthFailed naming the environment variable or file to set.
    """
    env = config.api_key_env or default_key_env(config.type)
    where = f"the key file {config.api_key_file}" if config.api_key_file else f"the environment variable {env}"
    try:
        secret = load_secret(env=env, file=config.api_key_file, what=f"provider {config.name!r} API key")
    except MissingCredential as exc:
        raise AuthFailed(str(exc), provider=config.name) from None
    return secret, f"check {where}"
