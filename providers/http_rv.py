"""Shared HTTP plumbing for REST adapters: one httpx client, the retry policy, errors mapped by a hook.

An adapter gives the base URL, how its credential becomes headers, and a function that turns a failed
response into a ``ProviderError``; this module does the rest. Only retryable errors are retried
(tenacity, jittered exponential backoff, bounded attempts), a ``retry_after`` from the provider is
honoured up to a cap, and waits go through the injected clock so tests never really sleep.

Secrets stay out of everything this module emits: credentials travel in headers only (never URLs),
log lines carry method, path and status, and any text that echoes the credential is redacted.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from clocks import Clock
from providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InvalidRequest,
    ProviderError,
    RateLimited,
    Transient,
    is_retryable,
)
from providers.secrets import MissingCredential, Secret, load_secret

log = logging.getLogger("scalectl.providers.http")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4  # total tries, the first included
    initial_wait: float = 0.5  # seconds; the jittered exponential backoff starts here
    max_wait: float = 8.0
    max_retry_after: float = 60.0  # a provider's Retry-After is honoured up to this

    @property
    def max_retries(self) -> int:
        return self.attempts - 1


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """A response that was not a success, as the adapter's error hook sees it (text already redacted)."""

    method: str
    path: str
    status: int
    body: Any  # decoded JSON when the body was JSON, else the text
    retry_after: float | None

    def message(self, *keys: str) -> str:
        """The provider's own error text: the first of ``keys`` present in a JSON body, else the raw text."""
        if isinstance(self.body, Mapping):
            for key in keys:
                value = self.body.get(key)
                if isinstance(value, str) and value.strip():
                    return value.strip()
                if isinstance(value, list) and value:
                    return "; ".join(str(v) for v in value)
            return ""
        return str(self.body or "").strip()[:300]


ErrorMapper = Callable[[HttpFailure], ProviderError]


def classify_status(failure: HttpFailure, provider: str, message: str, *, credential_hint: str = "") -> ProviderError:
    """The taxonomy by HTTP status alone; adapters call it after their body-specific checks."""
    where = f"{failure.method} {failure.path}"
    detail = f"{where}: HTTP {failure.status}" + (f": {message}" if message else "")
    status = failure.status
    if status in (401, 403):
        hint = f" (check {credential_hint})" if credential_hint else ""
        return AuthFailed(f"{where}: credentials refused (HTTP {status}){hint}", provider=provider)
    if status == 404:
        return InstanceNotFound(detail, provider=provider)
    if status == 429:
        return RateLimited(detail, provider=provider, retry_after=failure.retry_after)
    if status >= 500 or status in (408, 425):
        return Transient(detail, provider=provider, retry_after=failure.retry_after)
    return InvalidRequest(detail, provider=provider)


_RATELIMIT_RESET = re.compile(r"(?:^|[;,\s])(?:reset|t)\s*=\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def retry_after_from(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait, from ``Retry-After`` (seconds or HTTP date) or the IETF ``RateLimit`` headers."""
    value = headers.get("retry-after")
    if value:
        value = value.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - now)
    reset = headers.get("ratelimit-reset")
    if reset:
        try:
            return max(0.0, float(reset.strip()))
        except ValueError:
            pass
    combined = headers.get("ratelimit")  # draft-ietf-httpapi-ratelimit-headers: 'limit=10, remaining=0, reset=5'
    if combined:
        found = _RATELIMIT_RESET.search(combined)
        if found:
            return float(found.group(1))
    return None


class ApiClient:
    """One ``httpx.AsyncClient`` for one provider account, with retries and error mapping."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        credential_env: str,
        credential_file: str | None,
        auth_headers: Callable[[Secret], Mapping[str, str]],
        map_error: ErrorMapper,
        clock: Clock,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        user_agent: str = "scalectl",
    ) -> None:
        self.provider = provider
        self.credential_env = credential_env
        self.retry = retry or RetryPolicy()
        self._credential_file = credential_file
        self._auth_headers = auth_headers
        self._map_error = map_error
        self._clock = clock
        self._secret: Secret | None = None
        self._jitter = wait_random_exponential(multiplier=self.retry.initial_wait, max=self.retry.max_wait)
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            follow_redirects=False,  # a redirect could carry the Authorization header elsewhere
        )

    def __repr__(self) -> str:
        return f"ApiClient(provider={self.provider!r}, base_url={str(self._client.base_url)!r})"

    # ---- the two entry points --------------------------------------------------------------------
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        retry: bool = True,
    ) -> Any:
        """Send one request (retried when ``retry`` and the failure is retryable); return decoded JSON or None."""

        async def once() -> Any:
            return await self._send(method, path, params=params, json_body=json_body)

        return await self.call(once) if retry else await once()

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` under the retry policy: retryable ProviderErrors are retried, everything else raises."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            sleep=self._clock.sleep,
            reraise=True,
        )

        async def attempt() -> T:  # a coroutine function, so tenacity awaits it whatever ``fn`` is
            return await fn()

        result: T = await retrying(attempt)
        return result

    async def aclose(self) -> None:
        await self._client.aclose()

    # ---- internals -------------------------------------------------------------------------------
    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return min(float(retry_after), self.retry.max_retry_after)
        return float(self._jitter(state))

    def secret(self) -> Secret:
        if self._secret is None:
            try:
                self._secret = load_secret(env=self.credential_env, file=self._credential_file)
            except MissingCredential as exc:
                raise AuthFailed(str(exc), provider=self.provider) from None
        return self._secret

    def redact(self, text: str) -> str:
        secret = self._secret.reveal() if self._secret else ""
        return text.replace(secret, "***") if secret else text

    async def _send(self, method: str, path: str, *, params: Mapping[str, Any] | None, json_body: Any) -> Any:
        headers = dict(self._auth_headers(self.secret()))
        try:
            response = await self._client.request(method, path, params=params, json=json_body, headers=headers)
        except httpx.TimeoutException:
            log.warning("%s %s %s: timed out", self.provider, method, path)
            raise Transient(f"{method} {path}: timed out", provider=self.provider) from None
        except httpx.TransportError as exc:
            log.warning("%s %s %s: %s", self.provider, method, path, type(exc).__name__)
            raise Transient(f"{method} {path}: {type(exc).__name__}", provider=self.provider) from None
        log.debug("%s %s %s -> %s", self.provider, method, path, response.status_code)
        text = self.redact(response.text)
        body = _decode(text)
        if response.is_success:
            return body
        failure = HttpFailure(
            method=method,
            path=path,
            status=response.status_code,
            body=body,
            retry_after=retry_after_from(response.headers, self._clock.now()),
        )
        error = self._map_error(failure)
        log.info("%s %s %s -> HTTP %s (%s)", self.provider, method, path, failure.status, type(error).__name__)
        raise error


def _decode(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def credential_env(config_env: str | None, provider_type: str) -> str:
    """The environment variable a provider reads its key from: configured, else SCALECTL_<TYPE>_API_KEY."""
    return config_env or f"SCALECTL_{provider_type.upper()}_API_KEY"


def bearer(secret: Secret) -> Mapping[str, str]:
    return {"Authorization": f"Bearer {secret.reveal()}"}
