"""Shared HTTP plumbing for the REST adapters: one httpx client, one retry policy, errors mapped by a hook.

An adapter gives a base URL, its API key source, and a function that turns a failed response
(``HttpFailure``) into one of the taxonomy's errors; ``ApiClient`` does the rest. Only transient
failures and rate limits are retried, a bounded number of times, with jittered exponential backoff;
a wait the provider asks for (``Retry-After`` or the ``RateLimit`` headers) is honoured up to a cap.
All waiting goes through the injected clock, so tests never sleep for real.

Secrets stay out of everything this module emits: the key travels in a header only (never a URL),
log lines carry method, path and status, and response text that echoes the key is redacted before
anyone (error mapper, exception, log) sees it.
"""

from __future__ import annotations

import asyncio
import email.utils
import json as jsonlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

from scalectl.clocks import Clock
from scalectl.providers.errors import (
    AuthFailed,
    BudgetExhausted,
    InstanceNotFound,
    InvalidRequest,
    ListingIncomplete,
    NotSent,
    ProviderError,
    RateLimited,
    Transient,
)
from scalectl.providers.pacing import RATELIMIT_RESET, Pacer, RequestBudget
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.secrets import MissingCredential, Secret, load_secret

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try. ``max_attempts`` counts the first try.

    Only ``retry_on`` is retried in-call. ``DeleteDeferred`` is retryable too, but its wait is minutes:
    the caller retries it on a later tick instead of holding a request open.
    """

    max_attempts: int = 4
    base_wait: float = 0.5  # the jittered exponential backoff starts here...
    max_wait: float = 8.0  # ...and never waits longer than this
    # A wait the provider asks for (Retry-After) up to this long is waited inside the call; a longer one is
    # not held in a call at all: the call fails with RateLimited and the whole account pauses until then.
    max_retry_after: float = 60.0
    retry_on: tuple[type[ProviderError], ...] = (Transient, RateLimited)

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """A response that was not a success, as an adapter's error mapper sees it (text already redacted).

    ``path`` is the request path as the adapter passed it (relative to the base URL).
    """

    method: str
    path: str
    status: int
    body: Any  # decoded JSON when the body was JSON, else the text
    retry_after: float | None  # from the response headers, when they said

    @property
    def where(self) -> str:
        return f"{self.method} {self.path}"

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


def shared_status(status: int) -> bool:
    """Statuses every HTTP API means the same way (401/403, 429, 408/425, 5xx): no body needed to map them."""
    return status in (401, 403, 408, 425, 429) or status >= 500


def classify_status(
    failure: HttpFailure,
    provider: str,
    message: str,
    *,
    credential_hint: str = "",
    rate_limit_wait: float | None = None,
) -> ProviderError:
    """The taxonomy by HTTP status alone; adapters call it around their body-specific checks.

    ``credential_hint`` says where the key comes from (``ApiKey.hint``); ``rate_limit_wait`` is what
    a 429 reports when its headers name no wait (a body field, or the provider's documented spacing).
    """
    status = failure.status
    detail = f"{failure.where}: HTTP {status}" + (f": {message}" if message else "")
    if status in (401, 403):
        hint = f" (check {credential_hint})" if credential_hint else ""
        return AuthFailed(f"{failure.where}: credentials refused (HTTP {status}){hint}", provider=provider)
    if status == 429:
        wait = failure.retry_after if failure.retry_after is not None else rate_limit_wait
        return RateLimited(detail, provider=provider, retry_after=wait)
    if shared_status(status):
        return Transient(detail, provider=provider, retry_after=failure.retry_after)
    if status == 404:
        return InstanceNotFound(detail, provider=provider)
    return InvalidRequest(detail, provider=provider)


def retry_after_from(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait, from ``Retry-After`` (seconds or HTTP date) or the IETF ``RateLimit`` headers.

    ``now`` (epoch seconds, from the injected clock) turns an HTTP date into a delay. None when no
    header says, or when what it says cannot be read: the backoff takes over then.
    """
    value = (headers.get("retry-after") or "").strip()
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
            except (TypeError, ValueError):
                pass
    reset = (headers.get("ratelimit-reset") or "").strip()
    if reset:
        try:
            return max(0.0, float(reset))
        except ValueError:
            pass
    combined = headers.get("ratelimit")  # draft-ietf-httpapi-ratelimit-headers: 'limit=10, remaining=0, reset=5'
    if combined:
        found = RATELIMIT_RESET.search(combined)
        if found:
            return float(found.group(1))
    return None


def default_key_env(provider_type: str) -> str:
    return f"SCALECTL_{provider_type.upper()}_API_KEY"


class ApiKey:
    """Where one provider account's API key comes from: ``api_key_file``, else the environment variable
    ``api_key_env`` (default ``SCALECTL_<TYPE>_API_KEY``). Read on first ``load()``, then kept.

    An adapter that calls ``load()`` in its constructor fails at build time; one that leaves it to the
    first request fails there. Either way a missing key is ``AuthFailed`` naming where to put it.
    """

    def __init__(self, config: ProviderConfig):
        self.provider = config.name
        self.env = config.api_key_env or default_key_env(config.type)
        self.file = config.api_key_file
        self._secret: Secret | None = None

    @property
    def hint(self) -> str:
        """Where the key is read from, for error messages (never the value)."""
        return f"the key file {self.file}" if self.file else f"the environment variable {self.env}"

    def load(self) -> Secret:
        if self._secret is None:
            try:
                self._secret = load_secret(env=self.env, file=self.file)
            except MissingCredential as exc:
                raise AuthFailed(str(exc), provider=self.provider) from None
        return self._secret

    def redact(self, text: str) -> str:
        secret = self._secret.reveal() if self._secret else ""
        return text.replace(secret, "***") if secret else text

    def __repr__(self) -> str:
        return f"ApiKey(provider={self.provider!r}, from={self.hint!r})"


def bearer(secret: Secret) -> Mapping[str, str]:
    return {"Authorization": f"Bearer {secret.reveal()}"}


class ApiClient:
    """One ``httpx.AsyncClient`` for one provider account, with retries, pacing and error mapping."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        key: ApiKey,
        map_error: ErrorMapper,
        clock: Clock,
        auth_headers: Callable[[Secret], Mapping[str, str]] = bearer,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        pacer: Pacer | None = None,
        budgets: tuple[RequestBudget, ...] = (),
        user_agent: str = "scalectl",
    ) -> None:
        self.provider = provider
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self._key = key
        self._auth_headers = auth_headers
        self._map_error = map_error
        self._pacer = pacer
        self.budgets = budgets
        self._pace_lock = asyncio.Lock()
        # The account's own pause: a 429's Retry-After holds every caller of this account (every tier, every
        # tick), not just the call that got it. Monotonic, on the injected clock.
        self._paused_until = 0.0
        self._jitter = wait_random_exponential(multiplier=self.retry.base_wait, max=self.retry.max_wait)
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Accept": "application/json", "User-Agent": user_agent},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            # httpx drops the Authorization header on a redirect to another origin, so following is safe.
            follow_redirects=True,
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
        json: Any = None,
        retry: bool = True,
        pacer: Pacer | None = None,
    ) -> Any:
        """Send a request and return its decoded JSON body (None when empty). Raises ProviderError.

        ``retry=False`` for a step of a larger retried unit (see ``retrying``). ``pacer`` adds a
        per-operation rate (e.g. launches) on top of the client-wide one.
        """

        async def once() -> Any:
            return await self._send(method, path, params=params, json=json, pacer=pacer)

        return await self.retrying(once) if retry else await once()

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` under the retry policy; use it for composite steps like look-up-then-create,
        so that after a lost response the look-up runs again before any second create."""
        policy = self.retry
        retrier = AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=self._wait,
            # A spent budget of our own is not retried here: its wait is minutes, the next tick asks again.
            retry=retry_if_exception(lambda exc: isinstance(exc, policy.retry_on) and self._retry_in_call(exc)),
            sleep=self.clock.sleep,
            reraise=True,
        )
        async for state in retrier:
            with state:
                return await attempt()
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover

    def reserve(self, method: str, path: str, requests: int) -> None:
        """Before a run of ``requests`` calls (the pages of a listing): send nothing and raise
        ``BudgetExhausted`` unless every budget can fit them all now, so a listing does not spend the
        budget and still fail half-way. A run larger than a whole window can never fit:
        ``ListingIncomplete`` says which option to change."""
        for budget in self.budgets:
            free = budget.free()
            if free is None or not budget.applies(method, path) or requests <= free:
                continue
            assert budget.limit is not None
            if requests > budget.limit:
                raise ListingIncomplete(
                    f"{method} {path}: a full listing takes {requests} requests, more than the request budget allows "
                    f"in a whole window ({budget.limit} per {budget.window:g}s); raise the budget or the page size",
                    provider=self.provider,
                )
            budget.refused += 1
            raise BudgetExhausted(
                f"{method} {path}: not started, {requests} requests needed and {free} left in the request budget "
                f"({budget.limit} per {budget.window:g}s{', ' + budget.source if budget.source else ''})",
                provider=self.provider,
                retry_after=budget.window,
            )

    def redact(self, text: str) -> str:
        """``text`` with the API key blanked out, for provider text that may echo it."""
        return self._key.redact(text)

    async def aclose(self) -> None:
        await self._client.aclose()

    # ---- internals -------------------------------------------------------------------------------
    def _retry_in_call(self, exc: BaseException) -> bool:
        """A spent budget of our own, or a wait the provider asks for beyond ``max_retry_after``, is not
        waited inside the call: the account is paused, and a later tick asks again."""
        if isinstance(exc, BudgetExhausted):
            return False
        wait = exc.retry_after if isinstance(exc, ProviderError) else None
        return wait is None or wait <= self.retry.max_retry_after

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None and exc.retry_after >= 0:
            return exc.retry_after  # the provider said when (never more than max_retry_after: see _retry_in_call)
        return float(self._jitter(state))

    def paused_for(self) -> float:
        """Seconds this account still waits for a provider's Retry-After (0: it may send)."""
        return max(0.0, self._paused_until - self.clock.monotonic())

    def _check_pause(self, what: str) -> None:
        wait = self.paused_for()
        if wait > 0:
            raise RateLimited(
                f"{what}: not sent, the provider asked for no requests for {wait:.0f}s more (Retry-After)",
                provider=self.provider,
                retry_after=wait,
            )

    def _pause(self, error: ProviderError) -> None:
        if not isinstance(error, RateLimited) or error.retry_after is None or error.retry_after <= 0:
            return
        until = self.clock.monotonic() + error.retry_after
        if until > self._paused_until + 1.0:  # a new or longer pause: say so once, not per caller
            log.warning(
                "%s: rate limited; no requests to this account for %.0fs (the provider's Retry-After)",
                self.provider, error.retry_after,
            )  # fmt: skip
        self._paused_until = max(self._paused_until, until)

    async def _send(
        self, method: str, path: str, *, params: Mapping[str, Any] | None, json: Any, pacer: Pacer | None
    ) -> Any:
        headers = dict(self._auth_headers(self._key.load()))  # a missing key fails here, before any call
        budgets = [b for b in self.budgets if b.applies(method, path)]
        self._check_pause(f"{method} {path}")
        await self._pace([p for p in (self._pacer, pacer) if p is not None], budgets, f"{method} {path}")
        self._check_pause(f"{method} {path}")  # another caller was told to wait while this one was paced
        try:
            response = await self._client.request(method, path, params=params, json=json, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            log.warning("%s %s %s: not sent (%s)", self.provider, method, path, type(exc).__name__)
            raise NotSent(f"{method} {path}: not sent ({type(exc).__name__})", provider=self.provider) from None
        except httpx.TimeoutException as exc:
            log.warning("%s %s %s: timed out", self.provider, method, path)
            raise Transient(f"{method} {path}: timed out ({type(exc).__name__})", provider=self.provider) from None
        except httpx.TransportError as exc:
            log.warning("%s %s %s: %s", self.provider, method, path, type(exc).__name__)
            raise Transient(f"{method} {path}: {type(exc).__name__}", provider=self.provider) from None
        log.debug("%s %s %s -> %s", self.provider, method, path, response.status_code)
        for budget in self.budgets:
            budget.observe(response.headers)
        body = _decode(self.redact(response.text))
        if response.is_success:
            return body
        failure = HttpFailure(
            method=method,
            path=path,
            status=response.status_code,
            body=body,
            retry_after=retry_after_from(response.headers, self.clock.now()),
        )
        error = self._map_error(failure)
        self._pause(error)
        log.info("%s %s %s -> HTTP %s (%s)", self.provider, method, path, failure.status, type(error).__name__)
        raise error

    async def _pace(self, pacers: list[Pacer], budgets: list[RequestBudget], what: str) -> None:
        """Wait until every pacer and budget allows a call, then mark them all: the request goes out now.
        A budget that would need longer than its ``max_wait`` refuses instead (nothing is sent)."""
        if not pacers and not budgets:
            return
        async with self._pace_lock:
            for budget in budgets:
                wait = budget.remaining()
                if wait > budget.max_wait:
                    budget.refused += 1
                    limit = f"{budget.limit} per {budget.window:g}s" if budget.limit is not None else "quota"
                    raise BudgetExhausted(
                        f"{what}: not sent, the request budget ({limit}"
                        f"{', ' + budget.source if budget.source else ''}) allows the next in {wait:.0f}s",
                        provider=self.provider,
                        retry_after=wait,
                    )
            gates: list[Pacer | RequestBudget] = [*pacers, *budgets]
            for gate in gates:  # time only moves forward, so each stays satisfied once it is
                delay = gate.remaining()
                if delay > 0:
                    await self.clock.sleep(delay)
            for gate in gates:
                gate.mark()


def _decode(text: str) -> Any:
    if not text:
        return None
    try:
        return jsonlib.loads(text)
    except ValueError:
        return text
