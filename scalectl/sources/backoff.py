"""Per-source exponential backoff and error counts, so a dead broker or server is not hammered every tick.
The rest is short (the daemon caps it at two ticks), so a source back from an outage is read again within
a tick or two; losing a source and getting it back are logged once each, not once per tick."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from scalectl.clocks import Clock

log = logging.getLogger("scalectl.sources")


@dataclass
class _SourceState:
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""
    since: float = 0.0  # when the first failure of this streak happened (monotonic)


class Backoff:
    """After the n-th failure in a row a source rests ``min(base × 2^(n-1), cap)`` seconds (monotonic clock)."""

    def __init__(self, clock: Clock, *, base: float = 2.0, cap: float = 60.0):
        self._clock = clock
        self._base = base
        self._cap = cap
        self._states: dict[str, _SourceState] = {}
        self.error_counts: Counter[str] = Counter()  # every failure, per source, since start

    def ready(self, key: str) -> bool:
        state = self._states.get(key)
        return state is None or self._clock.monotonic() >= state.retry_at

    def success(self, key: str, shown: str | None = None) -> None:
        """``shown``: the source as a log line may name it (no credentials); default the key."""
        state = self._states.pop(key, None)
        if state is not None:
            lost_for = self._clock.monotonic() - state.since
            what = shown or key
            log.info("signal source %s answers again (lost for %.0fs, %d failed reads)", what, lost_for, state.failures)

    def failure(self, key: str, error: str, shown: str | None = None) -> None:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _SourceState(since=self._clock.monotonic())
            log.warning("signal source %s lost: %s (its tiers hold on unknown signals)", shown or key, error)
        state.failures += 1
        state.last_error = error
        state.retry_at = self._clock.monotonic() + min(self._base * 2 ** (state.failures - 1), self._cap)
        self.error_counts[key] += 1

    def resting(self, key: str) -> str:
        """The error to report while a source rests: its last error and when it is tried again."""
        state = self._states.get(key)
        if state is None:
            return ""
        wait = max(0.0, state.retry_at - self._clock.monotonic())
        return f"{state.last_error} (failed {state.failures}× in a row; next try in {wait:.0f}s)"

    def forget(self, key: str) -> None:
        self._states.pop(key, None)
