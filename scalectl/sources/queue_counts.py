"""What a broker reader returns: pending and in-flight messages per queue (None = unknown)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class BrokerError(Exception):
    """A broker could not be read. The message is one line, without secrets, and says what to check."""


@dataclass(frozen=True, slots=True)
class QueueCounts:
    pending: Mapping[str, int]  # queue -> messages waiting (all priority levels)
    in_flight: Mapping[str, int | None]  # queue -> delivered, not yet acknowledged; None = unknown
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def depth(self) -> float:
        return float(sum(self.pending.values()))

    @property
    def in_flight_total(self) -> float | None:
        if any(v is None for v in self.in_flight.values()):
            return None
        return float(sum(v for v in self.in_flight.values() if v is not None))
