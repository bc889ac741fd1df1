"""Keeping to a provider's request limits on our side, on the injected clock: a minimum spacing between
calls (``Pacer``) and a sliding-window budget (``RequestBudget``). ``ApiClient`` applies both."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping

from scalectl.clocks import Clock

RATELIMIT_RESET = re.compile(r"(?:^|[;,\s])(?:reset|t)\s*=\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
RATELIMIT_REMAINING = re.compile(r"(?:^|[;,\s])(?:remaining|r)\s*=\s*(\d+)", re.IGNORECASE)


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


class RequestBudget:
    """A provider's documented request limit, kept on our side: at most ``limit`` requests in any
    ``window`` seconds (a sliding window on the injected clock), optionally only for requests whose
    method and path start like ``applies_to`` (e.g. creates). ``limit=None``: no number is published,
    only the provider's ``RateLimit`` headers are followed.

    A request that fits goes at once; one that would fit within ``max_wait`` seconds waits for it;
    one that would wait longer is not sent at all (``BudgetExhausted``): the reconciler tries again on
    a later tick instead of holding its tick for minutes. When the provider's own ``RateLimit`` header
    says no request remains, the budget is spent until the reset it names (``observe``).
    """

    def __init__(
        self,
        clock: Clock,
        limit: int | None,
        window: float,
        *,
        max_wait: float = 5.0,
        applies_to: tuple[str, str] | None = None,
        source: str = "",
    ) -> None:
        if (limit is not None and limit < 1) or window <= 0:
            raise ValueError(f"a request budget needs limit >= 1 and window > 0, got {limit} per {window}s")
        self._clock = clock
        self.limit = limit
        self.window = window
        self.max_wait = max_wait
        self.applies_to = applies_to
        self.source = source  # where the numbers come from, for docs and error messages
        self._sent: deque[float] = deque()
        self._blocked_until = 0.0
        self.sent = 0  # requests let through, for benchmarks and metrics
        self.refused = 0  # requests not sent because the budget was spent

    def applies(self, method: str, path: str) -> bool:
        return self.applies_to is None or (method == self.applies_to[0] and path.startswith(self.applies_to[1]))

    def remaining(self) -> float:
        """Seconds until one more request fits (0: now)."""
        now = self._clock.monotonic()
        while self._sent and self._sent[0] <= now - self.window:
            self._sent.popleft()
        full = self.limit is not None and len(self._sent) >= self.limit
        wait = self._sent[0] + self.window - now if full else 0.0
        return max(0.0, wait, self._blocked_until - now)

    def free(self) -> int | None:
        """Requests that fit in the window right now (None: no fixed limit)."""
        if self.limit is None:
            return None
        self.remaining()  # drops what left the window
        return 0 if self._blocked_until > self._clock.monotonic() else max(0, self.limit - len(self._sent))

    def mark(self) -> None:
        if self.limit is not None:
            self._sent.append(self._clock.monotonic())
        self.sent += 1

    def observe(self, headers: Mapping[str, str]) -> None:
        """Honour the provider's own count: ``RateLimit: limit=60, remaining=0, reset=N`` (one window), or
        ``"minute";r=0;t=N, "day";r=900;t=M`` (one entry per window): any window with none remaining holds
        requests until its reset."""
        combined = headers.get("ratelimit") or ""
        entries = [combined] if "remaining" in combined.lower() else combined.split(",")
        for entry in entries:
            remaining = RATELIMIT_REMAINING.search(entry)
            reset = RATELIMIT_RESET.search(entry)
            if remaining is not None and int(remaining.group(1)) == 0 and reset is not None:
                self._blocked_until = max(self._blocked_until, self._clock.monotonic() + float(reset.group(1)))
