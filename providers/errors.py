"""The one error taxonomy every adapter maps its provider's failures into.

Each class says whether a retry can help; tenacity retries only those (``is_retryable``).
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base of every provider failure. ``retryable`` tells the caller whether trying again can help."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.provider = provider
        self.retry_after = retry_after

    def __str__(self) -> str:
        base = super().__str__()
        return f"{self.provider}: {base}" if self.provider else base


class InsufficientCapacity(ProviderError):
    """The offer (GPU type, region, capacity kind) has no machines right now. Try another offer."""


class QuotaExceeded(ProviderError):
    """Account limit reached (GPU quota, spend limit). Needs a person or another provider."""


class RateLimited(ProviderError):
    """Too many calls. ``retry_after`` seconds, when the provider said so."""

    retryable = True


class AuthFailed(ProviderError):
    """Missing, wrong or expired credentials. Never retried; never echoes the credential."""


class InstanceNotFound(ProviderError):
    """The provider does not know this instance (deleted, never existed). Delete treats it as success."""


class Transient(ProviderError):
    """5xx, timeouts, connection resets: worth another try with backoff."""

    retryable = True


class NotSent(Transient):
    """The request never reached the provider (connection refused, no connection within the connect
    timeout): nothing was acted on, so even a create may be sent again at once."""


class CreateUnconfirmed(ProviderError):
    """A create went out and no readable answer came back (the connection dropped after sending, no
    answer within the timeout, a 5xx, a success whose body cannot be read): the provider may have made
    the machine. Not retried: the caller keeps its row, adopts the machine when a listing shows it, and
    sends no create for this key before ``settles_at`` (epoch seconds on the adapter's clock: when the
    provider's declared listing lag has passed, so a look-up then can be trusted)."""

    def __init__(self, message: str, *, provider: str | None = None, settles_at: float):
        super().__init__(message, provider=provider)
        self.settles_at = settles_at


class InvalidRequest(ProviderError):
    """The provider rejected what we asked (unknown GPU or region, bad field). Fix the configuration."""


class ListingIncomplete(ProviderError):
    """The provider would not show every instance (a page cap, a page that came back short or empty,
    an answer without paging information). Nothing may be adopted, created or deleted on such a view:
    an instance that is not listed is not gone. Not retried in-call; the next tick asks again."""


class BudgetExhausted(RateLimited):
    """Our own request budget for this provider (its documented rate limit) is spent: the request was
    not sent. Retryable, but never in-call (the wait is often minutes): the caller tries again on a
    later tick, after ``retry_after``."""


class NotSupported(ProviderError):
    """The adapter (or this instance: an interruptible one) cannot do what was asked, by design of the
    cloud (Lambda has no stop, only terminate). Never retried; nothing was sent."""


class DeleteDeferred(ProviderError):
    """The provider refuses deletion for now (e.g. a minimum runtime); retry after ``retry_after``."""

    retryable = True


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable
