"""The sorted pair slopes of a tick window, carried from one tick's window to the next.

Theil–Sen's slope is the median of the slopes between every pair of points (each pair in window order,
where the later one is later in time). A demand window moves by a tick: the oldest points leave and one
comes. The slopes of the pairs that stay are the same numbers, so only the pairs of the points that left
are taken out (found in the sorted list by value) and those of the new point put in. Recomputing every
pair each tick was a fifth of a policy's time in a simulated day. The result is the full computation's
to the last bit: the same floats, the same median; a window that does not follow the last one is computed
whole."""

from __future__ import annotations

import bisect
import statistics
import threading
from collections.abc import Sequence

Point = tuple[float, float]  # (time, rate)
KEPT_WINDOWS = 64  # windows remembered (by their newest point): one per measure of each tier


def _middle(ordered: list[float]) -> float:
    """``statistics.median`` of a sorted list, without sorting it again (the same arithmetic)."""
    n = len(ordered)
    if n == 0:
        raise statistics.StatisticsError("no median for empty data")
    i = n // 2
    return ordered[i] if n % 2 == 1 else (ordered[i - 1] + ordered[i]) / 2


def pair_slopes(points: Sequence[Point]) -> list[float]:
    """Every pair's slope, in no particular order (the full computation)."""
    slopes: list[float] = []
    for i, (ta, ra) in enumerate(points):
        slopes += [(rb - ra) / (tb - ta) for tb, rb in points[i + 1 :] if tb > ta]
    return slopes


class SlopeMemo:
    """The sorted slopes of recent windows, each under its newest point."""

    def __init__(self, size: int = KEPT_WINDOWS) -> None:
        self._size = size
        self._windows: dict[Point, tuple[tuple[Point, ...], list[float]]] = {}
        self._lock = threading.Lock()  # policies of several tiers may decide on threads at once

    def median(self, points: tuple[Point, ...]) -> float:
        """``statistics.median(pair_slopes(points))``, from the last window when this one follows it."""
        with self._lock:
            ordered = self._carried(points)
            if ordered is None:
                ordered = sorted(pair_slopes(points))
            self._windows.pop(points[-1], None)  # newest last: the oldest window goes first
            self._windows[points[-1]] = (points, ordered)
            if len(self._windows) > self._size:
                del self._windows[next(iter(self._windows))]
        return _middle(ordered)

    def _carried(self, points: tuple[Point, ...]) -> list[float] | None:
        """The sorted slopes of ``points`` from the window its second newest point closed, or None."""
        if len(points) < 2:
            return None
        last = self._windows.get(points[-2])
        if last is None:
            return None
        before, ordered = last
        stay = len(points) - 1
        gone = len(before) - stay
        if gone < 0 or before[gone:] != points[:-1]:
            return None
        del self._windows[points[-2]]  # the window moved on: its list becomes this one's
        for i in range(gone):  # the pairs of each point that left, with every point after it
            ta, ra = before[i]
            for tb, rb in before[i + 1 :]:
                if tb > ta:
                    slope = (rb - ra) / (tb - ta)
                    at = bisect.bisect_left(ordered, slope)
                    if at == len(ordered) or ordered[at] != slope:
                        return None  # not there (cannot happen): compute the window whole
                    del ordered[at]
        tn, rn = points[-1]
        for ta, ra in points[:-1]:  # the new point's pairs
            if tn > ta:
                bisect.insort(ordered, (rn - ra) / (tn - ta))
        return ordered
