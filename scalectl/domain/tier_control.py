"""A tier's operator controls, as `scalectl scale` and `scalectl pause` store them and the reconciler reads
them: an override of the desired count (until a time, or until cleared) and a pause that holds the count."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class TierControl:
    """``override``: the count the operator asked for (None: none); ``override_until``: when it ends, in the
    daemon's world time (None: until `scalectl scale TIER --clear`); ``paused``: the desired count holds."""

    override: int | None = None
    override_until: float | None = None
    paused: bool = False

    def override_at(self, now: float) -> int | None:
        """The override in force at ``now``; None when there is none or it has expired."""
        if self.override is None or (self.override_until is not None and now >= self.override_until):
            return None
        return self.override

    def describe_override(self) -> str:
        """``override 5 until 14:03 UTC`` (or ``until cleared``), as reasons, status and describe show it."""
        until = "cleared" if self.override_until is None else clock_time(self.override_until)
        return f"override {self.override} until {until}"

    def describe(self, now: float) -> str | None:
        """What holds the tier at ``now``, in a phrase; None when nothing does."""
        parts = []
        if self.override_at(now) is not None:
            parts.append(f"{self.describe_override()} (scalectl scale)")
        if self.paused:
            parts.append("paused (scalectl pause)")
        return "; ".join(parts) or None


def clock_time(t: float) -> str:
    """A world time as ``HH:MM UTC``: short enough for a reason line."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M UTC")
