"""Requests per tier per minute, as the readings count them (what cost per 1,000 requests divides by).

Kept in memory for the minute in progress and written once the minute is over: one row per tier per
minute rather than a read and a write per tier per tick (which cost the simulator ~0.25 ms per tier per
tick). A crash loses at most the minute in progress, and status reads a minute nobody wrote as unknown."""

from __future__ import annotations


class RequestCounts:
    def __init__(self) -> None:
        self._open: dict[str, tuple[int, float]] = {}  # tier -> (minute, requests so far)

    def add(self, tier: str, t: float, requests: float) -> tuple[int, float] | None:
        """Count ``requests`` at ``t``; returns the tier's finished (minute, requests) when ``t`` opens a new
        minute, else None."""
        minute = int(t // 60)
        current = self._open.get(tier)
        if current is None or current[0] == minute:
            self._open[tier] = (minute, (current[1] if current else 0.0) + requests)
            return None
        self._open[tier] = (minute, requests)
        return current
