"""A measure's arrivals in time bins: minutes (for periods up to an hour) and quarter hours (for days and
weeks). Each tick's count is spread over the bins its interval covers, in proportion to the time in each
(15 s ticks that run late would otherwise leave one bin a tick high and the next a tick low). A bin keeps
how long it was observed: one only partly seen (a gap in the readings) is unknown, never a dip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scalectl.policies.core.constants import COVERED


@dataclass(frozen=True, slots=True)
class Bins:
    width: float  # seconds per bin
    keep: int  # bins kept, newest last
    counts: Mapping[int, tuple[float, float]] = field(default_factory=dict)  # bin → (count, seconds observed)

    def add(self, t0: float, t1: float, count: float) -> Bins:
        """Spread ``count`` arrivals over [t0, t1) and drop bins older than ``keep``."""
        if not t1 > t0:
            return self
        last = math.floor(t1 / self.width)
        oldest = last - self.keep  # this bin and older ones go
        if self.counts and min(self.counts) <= oldest:
            out = {i: v for i, v in self.counts.items() if i > oldest}
        else:  # most ticks drop no bin: a copy (in C) keeps the same bins in the same order
            out = dict(self.counts)
        for i in range(max(math.floor(t0 / self.width), last - self.keep + 1), last + 1):
            covered = min(t1, (i + 1) * self.width) - max(t0, i * self.width)
            if covered > 0:
                c, s = out.get(i, (0.0, 0.0))
                out[i] = (c + count * covered / (t1 - t0), s + covered)
        return Bins(self.width, self.keep, out)

    def rate(self, i: int) -> float | None:
        """Arrivals per second in bin ``i``; None unless it was observed for ``COVERED`` of its width."""
        c, s = self.counts.get(i, (0.0, 0.0))
        return c / s if s >= COVERED * self.width else None

    def series(self, now: float) -> tuple[int, list[float | None]]:
        """(index of the first, rates) of the complete bins before the one ``now`` falls in."""
        current = math.floor(now / self.width)
        first = min(self.counts, default=current)
        return first, [self.rate(i) for i in range(first, current)]

    def last_complete(self, now: float) -> int:
        """The index of the last bin ``series(now)`` returns (one before its first when it returns none),
        without building it."""
        current = math.floor(now / self.width)
        return max(min(self.counts, default=current), current) - 1

    def to_dict(self) -> dict[str, Any]:
        return {"width": self.width, "keep": self.keep, "counts": {str(i): list(v) for i, v in self.counts.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], width: float, keep: int) -> Bins:
        counts = {int(i): (float(c), float(s)) for i, (c, s) in (data.get("counts") or {}).items()}
        return cls(float(data.get("width", width)), int(data.get("keep", keep)), counts)
